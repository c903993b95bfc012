//! Calls the `serve_action` example's action (start that one first):
//! `cargo run -p concord-node --example call_action`
use concord_node::Node;
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let node = Node::builder("Shopper").build()?;
    // Discovery, hello, negotiation, code generation and verification; 0-RTT next time.
    let peer = node
        .connect("http://127.0.0.1:8080", "getProductInfo")
        .await?;
    let info = peer.info();
    println!(
        "{:?} protocol {} in {:?}",
        info.settlement, info.hash, info.setup_time
    );
    // From here on, no LLM: the generated code encodes and decodes every message.
    let product = peer
        .call("getProductInfo", json!({"productId": "P1"}))
        .await?;
    println!("{product}");
    peer.close().await;
    Ok(())
}
