//! Builds an agent description with Concord's extension, prints it, and reads it back the
//! way a peer would before connecting.
//!
//! `cargo run -p concord-describe --example weather_agent`

use concord_describe::{
    ActionBuilder, ConsensusProtocol, MetaProtocol, SecurityScheme, ThingBuilder,
};
use concord_proto::{Capability, ProtocolHash, META_PROTOCOL_VERSION};
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protocol_document =
        "# Weather protocol 1.0\nRequest: {\"city\": string}\nResponse: string\n";
    let mut meta = MetaProtocol::new("wss://weather.example.com/concord").with_capabilities(
        [
            Capability::NaturalLanguageNegotiation,
            Capability::TestCasesNegotiation,
        ]
        .into_iter()
        .collect(),
    );
    meta.consensus_protocols = Some(vec![ConsensusProtocol::new(
        "https://protocols.example.com/weather/1.0",
        ProtocolHash::of_text(protocol_document),
    )]);

    let thing = ThingBuilder::agent("WeatherAgent")
        .id("urn:uuid:6f1d3a7a-1f97-4e6b-b45f-f3c2e1c84c77")
        .description("Current weather and forecasts for any city.")
        .vendor("Example AG", "https://example.com")
        .base("https://weather.example.com/")
        .security("bearer_sc", SecurityScheme::bearer())
        .action(
            "getWeather",
            ActionBuilder::new("actions/getWeather")
                .input(json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}))
                .output(json!({"type": "string"}))
                .safe(true),
        )
        .meta_protocol(meta)
        .build()?;
    let text = serde_json::to_string_pretty(&thing)?;
    println!("{text}");

    // A peer, before connecting: which endpoint, which version, which consensus protocol.
    let peer_view = concord_describe::parse(text.as_bytes())?.thing;
    let meta = peer_view.meta_protocol.as_ref().ok_or("no meta-protocol")?;
    let version = meta
        .highest_common_version(&[META_PROTOCOL_VERSION])
        .ok_or("no common version")?;
    let protocol = meta
        .consensus_protocol("https://protocols.example.com/weather/1.0")
        .ok_or("protocol not offered")?;
    eprintln!(
        "connect to {} with meta-protocol {version}; 0-RTT with protocol {} if our copy matches: {}",
        meta.endpoint,
        protocol.hash,
        protocol.hash.matches(protocol_document)
    );
    Ok(())
}
