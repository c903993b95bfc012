//! `concord aicl encode`, `decode` and `check`.

mod support;

use support::*;

/// `concord aicl <args>` with `stdin`.
fn aicl(args: &[&str], stdin: &str) -> Output {
    run(concord().arg("aicl").args(args).write_stdin(stdin))
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

#[test]
fn encode_json_to_aicl() {
    let json = r#"{"name":"iPhone","price":899.99,"in_stock":true,"count":3,"tags":["a [b]"],
        "pixels":{"dtype":"uint8","shape":[3],"data":[1,2,3]}}"#;
    let out = aicl(&["encode"], json);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "[d:[s:name]:[s:iPhone],[s:price]:[f:899.99],[s:in_stock]:[b:true],[s:count]:[i:3],[s:tags]:[l:[s:a \\[b\\]]],[s:pixels]:[t:uint8:3:0RjU]]\n"
    );
    let pretty = aicl(&["encode", "--pretty"], r#"{"a":[1,2.5]}"#);
    assert_eq!(
        pretty.stdout,
        "[d:\n  [s:a]:[l:\n    [i:1],\n    [f:2.5]\n  ]\n]\n"
    );
}

#[test]
fn encode_refuses_what_aicl_cannot_hold() {
    let out = aicl(&["encode"], r#"{"a":{"b":null}}"#);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("4001"), "{}", out.stderr);
    assert!(out.stderr.contains("/a/b"), "{}", out.stderr);
    aicl(&["encode"], "{not json").fails(1, "the input is not valid JSON");
}

#[test]
fn decode_aicl_to_json() {
    let out = aicl(&["decode"], TOOL_CALL);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        r#"{"protocol":"LightAICL","session_id":"auto_web_05","msg_type":"tool_call","tool":"web_scraper","params":{"target_url":"https://example.com","extract":["title","price"]}}"#
            .to_owned()
            + "\n"
    );
    let tensor = aicl(&["decode", "--pretty"], "[t:int16:2:00000]");
    assert_eq!(tensor.code, 0, "{}", tensor.stderr);
    let json: serde_json::Value = serde_json::from_str(&tensor.stdout).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"dtype": "int16", "shape": [2], "data": [0, 0]})
    );
}

#[test]
fn decode_reports_code_and_position() {
    let out = aicl(&["decode"], "[l:\n  [i:1],\n  [i:99999999999999999999]\n]");
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr.trim_end(),
        "concord: error 1000 PROTOCOL_ERROR at line 3, column 6 (byte 18): integer `99999999999999999999` does not fit in 64 bits"
    );
    let nan = aicl(&["decode"], "[f:nan]");
    assert_eq!(nan.code, 1);
    assert!(
        nan.stderr.contains("4001") && nan.stderr.contains("NaN"),
        "{}",
        nan.stderr
    );
    let fenced = "Here you go:\n```aicl\n[i:7]\n```";
    assert_eq!(aicl(&["decode"], fenced).code, 1);
    let lenient = aicl(&["decode", "--lenient"], fenced);
    assert_eq!(lenient.stdout, "7\n");
}

#[test]
fn round_trip_through_both_commands() {
    let json = aicl(&["decode"], TOOL_CALL).stdout;
    let back = aicl(&["encode", "--pretty"], &json);
    assert_eq!(back.code, 0, "{}", back.stderr);
    let original: concord_aicl::Value = TOOL_CALL.parse().unwrap();
    assert_eq!(
        back.stdout.parse::<concord_aicl::Value>().unwrap(),
        original
    );
    let compact = aicl(&["encode"], &json);
    assert_eq!(compact.stdout, format!("{original}\n"));
}

#[test]
fn check_accepts_a_valid_message() {
    let out = aicl(&["check"], TOOL_CALL);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "ok: tool_call message, session auto_web_05\n");
}

#[test]
fn check_reports_missing_fields_and_bad_text() {
    let missing = TOOL_CALL.replace("  [s:tool]:[s:web_scraper],\n", "");
    let out = aicl(&["check"], &missing);
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr.trim_end(),
        "concord: error 2001 MISSING_FIELD at line 1, column 1 (byte 0): field `tool` is required in tool_call"
    );
    let broken = TOOL_CALL.replace("[s:title]", "[x:title]");
    let out = aicl(&["check"], &broken);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.starts_with(
            "concord: error 1000 PROTOCOL_ERROR at line 8, column 20 (byte 206): unknown type tag `x`"
        ),
        "{}",
        out.stderr
    );
    aicl(&["check"], "[d:[s:protocol]:[s:LightAICL],[s:session_id]:[s:s],[s:msg_type]:[s:result],[s:data]:[t:float32:2,3:9Yq<Q*]]")
        .fails(1, "concord: error 1001 INVALID_TENSOR");
    let header = aicl(
        &["check"],
        "[d:[s:protocol]:[s:HTTP],[s:session_id]:[s:s],[s:msg_type]:[s:result],[s:data]:[i:1]]",
    );
    assert_eq!(header.code, 1);
    assert!(
        header
            .stderr
            .contains("1000 PROTOCOL_ERROR at line 1, column 4 (byte 3)"),
        "{}",
        header.stderr
    );
}

#[test]
fn check_can_print_the_error_reply() {
    let missing = TOOL_CALL.replace("  [s:tool]:[s:web_scraper],\n", "");
    let out = aicl(&["check", "--reply"], &missing);
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stdout,
        "[d:[s:protocol]:[s:LightAICL],[s:session_id]:[s:auto_web_05],[s:msg_type]:[s:error],[s:code]:[i:2001],[s:reason]:[s:MISSING_FIELD],[s:detail]:[s:field `tool` is required in tool_call at line 1, column 1 (byte 0)]]\n"
    );
    // The reply is itself a valid message.
    assert_eq!(aicl(&["check"], &out.stdout).code, 0);
}

#[test]
fn files_as_arguments() {
    let dir = std::env::temp_dir().join(format!("concord-aicl-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("call.aicl");
    std::fs::write(&path, TOOL_CALL).unwrap();
    let out = aicl(&["check", path.to_str().unwrap()], "");
    assert_eq!(out.code, 0, "{}", out.stderr);
    aicl(&["check", dir.join("absent.aicl").to_str().unwrap()], "").fails(2, "cannot read");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn invalid_utf8_is_located() {
    run_with_stdin(&["aicl", "check"], b"[s:\xff]".to_vec())
        .fails(1, "(byte 3): input is not valid UTF-8");
}
