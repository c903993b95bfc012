//! What a bucket holds on the servers, for sizing a NATS cluster.

use crate::client::Nats;
use crate::error::NatsError;

/// What one key-value bucket holds, as JetStream accounts it (values, keys, headers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BucketUsage {
    /// Messages stored (the latest value of each key, and delete markers).
    pub messages: u64,
    /// Bytes stored.
    pub bytes: u64,
}

impl BucketUsage {
    /// Bytes per stored message (0 when empty).
    pub fn bytes_per_message(&self) -> u64 {
        self.bytes.checked_div(self.messages).unwrap_or(0)
    }
}

/// What the bucket `bucket` holds now.
///
/// # Errors
/// [`NatsError::Bucket`] when it cannot be read.
pub async fn bucket_usage(nats: &Nats, bucket: &str) -> Result<BucketUsage, NatsError> {
    let failed = |cause: String| NatsError::Bucket {
        bucket: bucket.to_owned(),
        cause,
    };
    let store = nats
        .jetstream()
        .get_key_value(bucket)
        .await
        .map_err(|error| failed(error.to_string()))?;
    let mut stream = store.stream.clone();
    let info = stream
        .info()
        .await
        .map_err(|error| failed(error.to_string()))?;
    Ok(BucketUsage {
        messages: info.state.messages,
        bytes: info.state.bytes,
    })
}
