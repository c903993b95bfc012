//! `LlmClient::probe`: the cheap start-up check that a server answers, asking no model.

use std::io::{Read, Write};
use std::time::Duration;

use concord_llm::{LlmClient, LlmConfig, LlmError};
use concord_llm_script::ScriptServer;

/// A client for `base_url` with an API key and no retries.
fn client(base_url: &str) -> LlmClient {
    LlmClient::new(
        LlmConfig::new(base_url, "test-model")
            .with_api_key("sk-secret")
            .with_max_retries(0),
    )
    .unwrap()
}

#[tokio::test]
async fn a_server_that_answers_passes_and_no_model_is_asked() {
    // The scripted server lists no models (404): it answers, so it is reachable.
    let server = ScriptServer::start([]).await.unwrap();
    let client = client(&server.base_url());
    client.probe(Duration::from_secs(2)).await.unwrap();
    assert!(server.requests().is_empty(), "no chat request was made");
    assert_eq!(client.usage().summary().calls, 0, "nothing is recorded");
}

#[tokio::test]
async fn a_closed_port_is_a_transport_error_naming_the_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let error = client(&format!("http://{address}/v1"))
        .probe(Duration::from_secs(2))
        .await
        .unwrap_err();
    assert!(matches!(error, LlmError::Transport { .. }), "{error:?}");
    assert!(error.to_string().contains(&address.to_string()), "{error}");
}

#[tokio::test]
async fn a_refused_key_fails_and_silence_times_out() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        // First connection: 401 with a body quoting the key; second: never answers.
        let (mut first, _) = listener.accept().unwrap();
        let mut buffer = [0u8; 4096];
        let _ = first.read(&mut buffer);
        let body = r#"{"error": "bad key sk-secret"}"#;
        let reply = format!(
            "HTTP/1.1 401 Unauthorized\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        first.write_all(reply.as_bytes()).unwrap();
        let (_second, _) = listener.accept().unwrap();
        std::thread::sleep(Duration::from_secs(5));
    });
    let client = client(&format!("http://{address}/v1"));
    let error = client.probe(Duration::from_secs(2)).await.unwrap_err();
    assert!(
        matches!(error, LlmError::HttpStatus { status: 401, .. }),
        "{error:?}"
    );
    assert!(!error.to_string().contains("sk-secret"), "{error}");
    let error = client.probe(Duration::from_millis(300)).await.unwrap_err();
    assert!(
        matches!(error, LlmError::Timeout { timeout, .. } if timeout == Duration::from_millis(300)),
        "{error:?}"
    );
}
