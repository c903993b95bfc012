//! An agent on Concord: serves `getProductInfo` on a free loopback port, then calls it as
//! a second agent would. The first run negotiates the protocol; later runs resume it (0-RTT).
use concord::{json, ActionError, ActionSpec, Node, Value};

#[concord::tokio::main(crate = "concord::tokio")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Where both agents keep their protocols (the platform data directory if not set).
    let data = std::env::temp_dir().join("concord-agent-example");
    let action = ActionSpec {
        name: "getProductInfo".into(),
        description: "Product information by product id.".into(),
        input: json!({"type": "object", "properties": {"productId": {"type": "string"}},
                      "required": ["productId"]}),
        output: json!({"title": "ProductInfo", "type": "object", "required": ["name", "price"],
                       "properties": {"name": {"type": "string"}, "price": {"type": "number"}}}),
    };
    let provider = Node::builder("Product agent")
        .data_dir(&data)
        .action(action, |input: Value| async move {
            match input["productId"].as_str() {
                Some("P1") => Ok(json!({"name": "Laptop", "price": 1299.99})),
                _ => Err(ActionError::not_found("no such product")),
            }
        })
        .build()?;
    let server = provider.serve("127.0.0.1:0").await?;
    println!("serving {}", server.description_url());

    let requester = Node::builder("Shopper").data_dir(&data).build()?;
    let peer = requester.connect(server.url(), "getProductInfo").await?;
    let product = peer
        .call("getProductInfo", json!({"productId": "P1"}))
        .await?;
    let info = peer.info();
    println!(
        "{:?} protocol {} in {:?}",
        info.settlement, info.hash, info.setup_time
    );
    println!("{product}");
    peer.close().await;
    server.shutdown().await?;
    Ok(())
}
