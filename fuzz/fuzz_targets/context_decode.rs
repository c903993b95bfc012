//! Context decoding, rendering and validation, and variable expressions: never
//! panic; rendering is the same for two decodings of the same bytes; an
//! expression prints back to text that parses to the same expression.
#![no_main]

use concord_context::{Context, Expression, View};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(expression) = Expression::parse(text) {
            assert_eq!(Expression::parse(&expression.to_string()), Ok(expression));
        }
    }
    let (Ok(context), Ok(again)) = (Context::from_json(data), Context::from_json(data)) else {
        return;
    };
    let mut views = vec![View::Global];
    views.extend(context.instances().into_iter().cloned().map(View::Instance));
    for view in &views {
        assert_eq!(context.render(view), again.render(view));
        let _ = context.validate(view);
        for message in context.messages() {
            let _ = context.substitute(view, &message.to_value());
        }
    }
});
