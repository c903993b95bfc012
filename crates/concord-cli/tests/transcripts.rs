//! `concord transcripts list|show|prune` on the stores a `concord serve` and `concord
//! call` filled.

mod support;

use std::path::Path;

use support::*;

fn transcripts(data_dir: &Path, args: &[&str]) -> Output {
    run(concord()
        .arg("transcripts")
        .args(args)
        .arg("--data-dir")
        .arg(data_dir))
}

#[test]
fn list_show_and_prune_what_the_nodes_recorded() {
    let (served, provider_config) = provider("");
    // A signed requester: 0-RTT only in an authenticated session.
    let signer = Signer::start();
    let requester = &signer.data_dir;

    // An empty store lists nothing.
    let output = transcripts(requester.path(), &["list"]);
    assert_eq!(output.code, 0, "{}", output.stderr);
    assert_eq!(output.stdout, "");
    assert!(
        output.stderr.contains("no transcripts stored"),
        "{}",
        output.stderr
    );

    // Three calls: a negotiation, then two 0-RTT resumes; one transcript each.
    let mut ids = Vec::new();
    for product in ["P12345", "P2", "P3"] {
        let call = signed_call_json(
            &served.url,
            &format!(r#"{{"productId": "{product}"}}"#),
            &signer,
        );
        assert!(call.code <= 1, "{}", call.stderr);
        ids.push(
            call.json()["transcriptId"]
                .as_i64()
                .expect("a transcriptId"),
        );
    }

    // The requester's own node (serving its DID document) lets go of the store: the
    // prunes below checkpoint it alone.
    drop(signer.served);

    let output = transcripts(requester.path(), &["list"]);
    assert_eq!(output.code, 0, "{}", output.stderr);
    let lines: Vec<&str> = output.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", output.stdout);
    for column in [
        "id", "started", "role", "outcome", "frames", "bytes", "channel", "peer",
    ] {
        assert!(lines[0].contains(column), "{}", lines[0]);
    }
    // How each session was protected, short: `noise`/`plain`, `+did` when the peer was
    // authenticated, `-` when the node did not record it.
    // Here: the Noise channel, the provider's DID proven.
    let channel_at = lines[0].find("channel").unwrap();
    for line in &lines[1..] {
        let short = line[channel_at..].split_whitespace().next().unwrap_or("");
        assert_eq!(short, "noise+did", "{line}");
    }
    // Most recent first.
    assert!(
        lines[1].trim_start().starts_with(&ids[2].to_string()),
        "{}",
        output.stdout
    );
    assert!(
        lines[3].trim_start().starts_with(&ids[0].to_string()),
        "{}",
        output.stdout
    );
    assert!(
        lines[1].contains("requester") && lines[1].contains("agreed"),
        "{}",
        output.stdout
    );
    assert!(
        lines[1].ends_with(&format!("{}#getProductInfo", served.description)),
        "{}",
        output.stdout
    );

    let list = transcripts(requester.path(), &["list", "--json", "--limit", "2"]).json();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["id"], ids[2]);
    assert_eq!(list[0]["role"], "requester");
    assert_eq!(list[0]["outcome"], "agreed");
    assert!(list[0]["bytes"].as_u64().unwrap() > 0);
    let channel = list[0]["channel"].as_str().unwrap();
    assert!(
        channel.starts_with("Noise_XX_25519_ChaChaPoly_BLAKE2s; peer proved did:wba:localhost")
            && channel.contains(&format!("we signed as {}", signer.did)),
        "{channel}"
    );
    // The negotiation has many more frames than a 0-RTT resume (the two hellos), each
    // with its whole text.
    let negotiated = transcripts(requester.path(), &["show", &ids[0].to_string(), "--json"]).json();
    let frames = negotiated["frames"].as_array().unwrap();
    assert_eq!(
        frames.len() as u64,
        negotiated["frameCount"].as_u64().unwrap()
    );
    assert!(frames.len() as u64 > list[0]["frameCount"].as_u64().unwrap());
    assert_eq!(frames[0]["kind"], "hello");
    assert_eq!(frames[0]["direction"], "sent");
    assert!(frames.iter().any(|frame| frame["text"]
        .as_str()
        .is_some_and(|text| text.contains("# Requirement"))));

    let output = transcripts(requester.path(), &["show", &ids[0].to_string()]);
    assert_eq!(output.code, 0, "{}", output.stderr);
    assert!(
        output
            .stdout
            .starts_with(&format!("id:        {}\n", ids[0])),
        "{}",
        output.stdout
    );
    assert!(
        output.stdout.contains("outcome:   agreed: "),
        "{}",
        output.stdout
    );
    // The full channel line, under the header.
    let header = output.stdout.split("\n\n").next().unwrap();
    assert!(
        header
            .lines()
            .any(|line| line == format!("channel:   {channel}")),
        "{}",
        output.stdout
    );
    assert!(
        output.stdout.contains("sent      hello"),
        "{}",
        output.stdout
    );
    assert!(
        output.stdout.contains("received  hello"),
        "{}",
        output.stdout
    );
    assert!(
        output.stdout.contains("protocolNegotiation"),
        "{}",
        output.stdout
    );
    // Previews are bounded: no frame line carries a whole protocol document (the channel
    // line, two DIDs long, is bounded by the store).
    assert!(
        output
            .stdout
            .lines()
            .filter(|line| !line.starts_with("channel:"))
            .all(|line| line.chars().count() < 200),
        "{}",
        output.stdout
    );

    // Unknown and malformed ids: the input was checked and found wrong.
    transcripts(requester.path(), &["show", "999999"]).fails(1, "no transcript has id 999999");
    // A malformed id is a usage error (2), an unknown one was checked and found wrong (1).
    transcripts(requester.path(), &["show", "abc"]).fails(2, "invalid value 'abc'");

    // Nothing is a week old.
    let output = transcripts(requester.path(), &["prune"]);
    assert_eq!(output.code, 0, "{}", output.stderr);
    assert!(
        output.stdout.starts_with("deleted 0 transcripts\n"),
        "{}",
        output.stdout
    );
    let output = transcripts(requester.path(), &["prune", "--keep", "1"]);
    assert_eq!(output.code, 0, "{}", output.stderr);
    assert!(
        output.stdout.starts_with("deleted 2 transcripts\n"),
        "{}",
        output.stdout
    );
    assert!(output.stdout.contains(", 0 after"), "{}", output.stdout);
    let wal = requester.path().join("concord.db-wal");
    assert_eq!(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0), 0);
    let list = transcripts(requester.path(), &["list", "--json"]).json();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["id"], ids[2]);
    let output = transcripts(requester.path(), &["prune", "--older-than", "0s"]);
    assert!(
        output.stdout.starts_with("deleted 1 transcript\n"),
        "{}",
        output.stdout
    );

    // The provider's store, while `concord serve` runs: its sessions are listed too.
    // Each names the requester's DID it authenticated.
    let list = transcripts(&provider_config.path().join("data"), &["list", "--json"]).json();
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|t| t["role"] == "provider"
                && t["channel"]
                    .as_str()
                    .is_some_and(|channel| channel
                        .ends_with(&format!("; peer authenticated as {}", signer.did)))),
        "{list}"
    );

    // A bad duration is a usage error.
    let output = transcripts(requester.path(), &["prune", "--older-than", "soon"]);
    assert_eq!(output.code, 2, "{}", output.stderr);
}
