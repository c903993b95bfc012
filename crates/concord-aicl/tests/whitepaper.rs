//! Every AICL example of the whitepaper (`../shared/seeds/aicl-whitepaper.zh.md`): the
//! well-formed ones parse to the value they show, the placeholder ones are refused with the
//! right error code.

use concord_aicl::{
    DType, ErrorCode, ErrorKind, Map, Message, MsgType, ParseOptions, Tensor, Value,
};

fn dict(entries: Vec<(&str, Value)>) -> Value {
    Value::Dict(
        entries
            .into_iter()
            .map(|(key, value)| (key.to_owned(), value))
            .collect(),
    )
}

fn s(text: &str) -> Value {
    Value::from(text)
}

fn header(session: &str, msg_type: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("protocol", s("LightAICL")),
        ("session_id", s(session)),
        ("msg_type", s(msg_type)),
    ]
}

// §3.1, the scalar examples (3.1415926535 is the whitepaper's literal, not π).
#[test]
#[allow(clippy::approx_constant)]
fn scalar_examples() {
    let cases = [
        ("[s:temperature]", s("temperature")),
        ("[i:-42]", Value::Int(-42)),
        ("[f:3.1415926535]", Value::Float(3.1415926535)),
        ("[b:true]", Value::Bool(true)),
    ];
    for (text, expected) in cases {
        assert_eq!(text.parse::<Value>().unwrap(), expected, "{text}");
        assert_eq!(expected.to_string(), text);
    }
}

const LIST: &str = "[l:
  [s:Apple],
  [i:3],
  [f:1.99]
]";

const DICT: &str = "[d:
  [s:name]:[s:iPhone],
  [s:price]:[f:899.99],
  [s:in_stock]:[b:true]
]";

// §3.2, the list and dictionary examples; our pretty writer writes them exactly as shown.
#[test]
fn compound_examples() {
    let list = Value::List(vec![s("Apple"), Value::Int(3), Value::Float(1.99)]);
    let product = dict(vec![
        ("name", s("iPhone")),
        ("price", Value::Float(899.99)),
        ("in_stock", Value::Bool(true)),
    ]);
    assert_eq!(LIST.parse::<Value>().unwrap(), list);
    assert_eq!(DICT.parse::<Value>().unwrap(), product);
    assert_eq!(format!("{list:#}"), LIST);
    assert_eq!(format!("{product:#}"), DICT);
}

// §3.2 as printed, comments included: lenient mode skips `#` comments and reads the first value.
#[test]
fn compound_block_with_comments_in_lenient_mode() {
    let block = format!("# 列表\n{LIST}\n\n# 字典（键必须为字符串）\n{DICT}\n");
    let first: Value = concord_aicl::from_str_with(&block, &ParseOptions::lenient()).unwrap();
    assert_eq!(first, LIST.parse::<Value>().unwrap());
    let strict = concord_aicl::from_str::<Value>(&block).unwrap_err();
    assert_eq!(strict.code(), ErrorCode::ProtocolError);
}

// §3.3: `9Yq<Q*` is 6 characters, 4 bytes; a 2×3 float32 tensor needs 24. Not a valid tensor.
#[test]
fn tensor_example_is_refused() {
    let error = "[t:float32:2,3:9Yq<Q*]".parse::<Value>().unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidTensor);
    assert!(matches!(
        error.kind(),
        ErrorKind::TensorLength {
            expected: 24,
            actual: 6,
            ..
        }
    ));
    assert_eq!(error.position().unwrap().offset, 15);
}

const ERROR_TEMPLATE: &str = "[d:
  [s:protocol]:[s:LightAICL],
  [s:session_id]:[s:current_session],
  [s:msg_type]:[s:error],
  [s:code]:[i:2001],
  [s:reason]:[s:MISSING_REQUIRED_FIELD],
  [s:detail]:[s:Field 'target_url' required in tool_call]
]";

// §4.2, the error response template.
#[test]
fn error_template() {
    let message = Message::parse(ERROR_TEMPLATE).unwrap();
    let mut expected = header("current_session", "error");
    expected.extend([
        ("code", Value::Int(2001)),
        ("reason", s("MISSING_REQUIRED_FIELD")),
        ("detail", s("Field 'target_url' required in tool_call")),
    ]);
    assert_eq!(message.clone().into_value(), dict(expected));
    let info = message.error_info().unwrap();
    assert_eq!(info.code, ErrorCode::MissingField);
    assert_eq!(message.to_text_pretty(), ERROR_TEMPLATE);
}

const MULTIMODAL: &str = "[d:
  [s:protocol]:[s:LightAICL],
  [s:session_id]:[s:multimodal_001],
  [s:msg_type]:[s:task_request],
  [s:task]:[s:生成视频解说],
  [s:constraints]:[d:
    [s:video]:[t:uint8:300,1080,1920,3:Kjsd...],
    [s:lang]:[s:zh-CN]
  ]
]";

// §7.1: `Kjsd...` stands for 1.8 GB of video; as written it is refused as a tensor error, and
// with a real (small) tensor in its place the message is a valid task_request.
#[test]
fn multimodal_task_request() {
    let error = Message::parse(MULTIMODAL).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidTensor);
    assert_eq!(error.position().unwrap().text.line, 7);

    let video = Tensor::from_vec(vec![2, 2, 2, 3], (0u8..24).collect::<Vec<_>>()).unwrap();
    let text = MULTIMODAL.replace(
        "[t:uint8:300,1080,1920,3:Kjsd...]",
        &Value::Tensor(video.clone()).to_string(),
    );
    let message = Message::parse(&text).unwrap();
    assert_eq!(message.msg_type(), MsgType::TaskRequest);
    assert_eq!(message.get("task"), Some(&s("生成视频解说")));
    let constraints = message.get("constraints").unwrap();
    assert_eq!(constraints.get("video"), Some(&Value::Tensor(video)));
    assert_eq!(constraints.get("lang"), Some(&s("zh-CN")));
}

const TOOL_CALL: &str = "[d:
  [s:protocol]:[s:LightAICL],
  [s:session_id]:[s:auto_web_05],
  [s:msg_type]:[s:tool_call],
  [s:tool]:[s:web_scraper],
  [s:params]:[d:
    [s:target_url]:[s:https://example.com],
    [s:extract]:[l:[s:title],[s:price]]
  ]
]";

// §7.2, the tool call.
#[test]
fn tool_call() {
    let message = Message::parse(TOOL_CALL).unwrap();
    let mut expected = header("auto_web_05", "tool_call");
    expected.extend([
        ("tool", s("web_scraper")),
        (
            "params",
            dict(vec![
                ("target_url", s("https://example.com")),
                ("extract", Value::List(vec![s("title"), s("price")])),
            ]),
        ),
    ]);
    assert_eq!(message.into_value(), dict(expected));
}

const FEDERATED: &str = "[d:
  [s:protocol]:[s:LightAICL],
  [s:session_id]:[s:fl_session_12],
  [s:msg_type]:[s:result],
  [s:data]:[t:float32:128,256:YHj*...]
]";

// §7.3: `YHj*...` stands for 128 KiB of weights; refused as written, valid with real data.
#[test]
fn federated_learning_result() {
    let error = Message::parse(FEDERATED).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidTensor);
    let weights: Vec<f32> = (0..128 * 256).map(|i| (i as f32).sin()).collect();
    let tensor = Tensor::from_vec(vec![128, 256], weights.clone()).unwrap();
    let text = FEDERATED.replace(
        "[t:float32:128,256:YHj*...]",
        &Value::Tensor(tensor).to_string(),
    );
    let message = Message::parse(&text).unwrap();
    let data = message.get("data").and_then(Value::as_tensor).unwrap();
    assert_eq!(data.dtype(), DType::Float32);
    assert_eq!(data.shape(), &[128, 256]);
    assert_eq!(data.to_vec::<f32>().unwrap(), weights);
}

// §8.1–8.3 are fragments (entries, not values); in a message they are read as shown.
#[test]
fn extension_fragments() {
    let signed = "[d:[s:protocol]:[s:LightAICL],[s:session_id]:[s:s1],[s:msg_type]:[s:result],[s:data]:[i:1],\n[s:signature]:[s:4fd2a1f3...]\n]";
    assert_eq!(
        Message::parse(signed).unwrap().signature(),
        Some("4fd2a1f3...")
    );

    let stream = "[d:[s:protocol]:[s:LightAICL],[s:session_id]:[s:s1],[s:msg_type]:[s:result],[s:content]:[s:part three],\n[s:stream_id]:[s:chunk_3/5],\n[s:is_final]:[b:false]\n]";
    let message = Message::parse(stream).unwrap();
    let chunk = message.stream().unwrap().unwrap();
    assert_eq!(chunk.position, Some((3, 5)));
    assert_eq!(chunk.is_final, Some(false));

    let negotiate = "[d:[s:protocol]:[s:LightAICL],[s:session_id]:[s:s1],\n[s:msg_type]:[s:protocol_negotiate],\n[s:supported]:[l:[s:LightAICL_v1],[s:LightAICL_v2]]\n]";
    let offer = Message::parse(negotiate).unwrap();
    assert_eq!(offer.supported_versions(), ["LightAICL_v1", "LightAICL_v2"]);
    let reply = offer
        .negotiation_reply(&["LightAICL_v2", "LightAICL_v1"])
        .unwrap();
    assert_eq!(reply.get("selected"), Some(&s("LightAICL_v2")));
    let refused = offer.negotiation_reply(&["LightAICL_v3"]).unwrap_err();
    assert_eq!(refused.code(), ErrorCode::ProtocolError);
}

// §2.1: the header grammar, built up by the BNF.
#[test]
fn header_grammar() {
    let text = concat!(
        "[d:",
        "[s:protocol]:[s:LightAICL],",
        "[s:session_id]:[s:abc-123],",
        "[s:msg_type]:[s:data_query],",
        "[s:query]:[s:price of iPhone]",
        "]"
    );
    let message = Message::parse(text).unwrap();
    assert_eq!(message.session_id(), "abc-123");
    assert_eq!(message.msg_type(), MsgType::DataQuery);
    let mut fields = Map::new();
    fields.insert("query".into(), s("price of iPhone"));
    assert_eq!(message.get("query"), fields.get("query"));
}

/// Every ```aicl block of the whitepaper is one of the examples above (so none is missed).
#[test]
fn every_block_of_the_whitepaper_is_covered() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/seeds/aicl-whitepaper.zh.md"
    );
    let Ok(whitepaper) = std::fs::read_to_string(path) else {
        eprintln!("skipped: {path} is absent");
        return;
    };
    let known = [
        format!("# 列表\n{LIST}\n\n# 字典（键必须为字符串）\n{DICT}"),
        "[t:float32:2,3:9Yq<Q*]".to_owned(),
        ERROR_TEMPLATE.to_owned(),
        MULTIMODAL.to_owned(),
        TOOL_CALL.to_owned(),
        FEDERATED.to_owned(),
        "# 添加数字签名\n[s:signature]:[s:4fd2a1f3...]".to_owned(),
        "[s:stream_id]:[s:chunk_3/5],\n[s:is_final]:[b:false]".to_owned(),
        "[s:msg_type]:[s:protocol_negotiate],\n[s:supported]:[l:[s:LightAICL_v1],[s:LightAICL_v2]]"
            .to_owned(),
    ];
    let blocks: Vec<&str> = whitepaper
        .split("```aicl\n")
        .skip(1)
        .map(|rest| rest.split("\n```").next().unwrap_or(rest))
        .collect();
    assert_eq!(blocks.len(), known.len());
    for block in blocks {
        assert!(
            known.iter().any(|example| example == block),
            "not covered:\n{block}"
        );
    }
}
