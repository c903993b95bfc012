//! Interaction-layer messages, differentially: the one-pass decoder behind
//! `Message::decode` accepts a message only if the step-by-step decoder accepts it too and
//! gives the same `Message` (it may give up on anything: the other decoder then answers).
//! Checked under the default limits and under tight ones (depth, names, problem texts), so
//! that the limit checks of both decoders are reached by short inputs.
#![no_main]

use concord_interact::{Limits, Message};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for limits in [Limits::default(), Message::tight_limits()] {
        if data.len() > limits.max_message_size {
            return;
        }
        let (fast, checked) = Message::decode_paths(data, &limits);
        if let Some(fast) = fast {
            match checked {
                Ok(checked) => assert_eq!(fast, checked, "the two decoders disagree"),
                Err(error) => {
                    panic!("the one-pass decoder accepts what the checked one refuses: {error}")
                }
            }
        }
    }
});
