//! node-wot 0.9.2 (the Eclipse Thingweb WoT runtime) consumes agents served by `concord
//! serve` over the WoT HTTP binding: the WeatherAgent example, the product agent and
//! `interop/node-wot/settings-agent.toml`, and finds them with `WoT.exploreDirectory` in a
//! `concord directory serve` they are registered in, driven by the `node --test` tests of
//! `interop/node-wot/concord.test.js`. Ignored by default: it needs Node.js and `npm ci`
//! in `interop/node-wot` (`.ci/run` does both and runs it with `--ignored`).

mod support;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::*;

/// The folder of the node-wot tests.
fn interop() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop/node-wot")
}

fn serve(config: &Path, data_dir: &Path) -> Served {
    Served::start(&[
        OsStr::new("--config"),
        config.as_os_str(),
        OsStr::new("--listen"),
        OsStr::new("127.0.0.1:0"),
        OsStr::new("--data-dir"),
        data_dir.as_os_str(),
    ])
}

/// Registers each agent's description in the directory at `directory` (its base URL).
fn register(directory: &str, agents: &[&Served]) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        for agent in agents {
            let td = client
                .get(&agent.description)
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            let answer = client
                .post(format!("{directory}things"))
                .header("content-type", "application/td+json")
                .body(td)
                .send()
                .await
                .unwrap();
            assert_eq!(answer.status().as_u16(), 201, "{}", agent.url);
        }
    });
}

#[test]
#[ignore = "needs Node.js and `npm ci` in interop/node-wot (.ci/run does both)"]
fn node_wot_consumes_the_agents_over_http() {
    let interop = interop();
    assert!(
        interop.join("node_modules/@node-wot/core").is_dir(),
        "run `npm ci` in {} first",
        interop.display()
    );
    // The WeatherAgent's configuration names an ingest token; any will do here.
    std::env::set_var("WEATHER_INGEST_TOKEN", "node-wot-interop-token-5c1e");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dirs: Vec<tempfile::TempDir> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let weather = serve(
        &root.join("../../examples/weather/agent.toml"),
        dirs[0].path(),
    );
    let product = serve(&example_config(), dirs[1].path());
    let settings = serve(&interop.join("settings-agent.toml"), dirs[2].path());
    // A directory they are registered in (POST /things: anonymous TDs get an id there),
    // for WoT.exploreDirectory.
    let directory = Served::directory(&[
        OsStr::new("--listen"),
        OsStr::new("127.0.0.1:0"),
        OsStr::new("--data-dir"),
        dirs[3].path().as_os_str(),
    ]);
    register(&directory.url, &[&weather, &product, &settings]);
    // Its report goes to a file (no pipe to fill); it is given 3 minutes, then killed.
    let report = dirs[0].path().join("node-test.txt");
    let mut node = Command::new("node")
        .arg("--test")
        .current_dir(&interop)
        .env("WEATHER_URL", &weather.url)
        .env("PRODUCT_URL", &product.url)
        .env("SETTINGS_URL", &settings.url)
        .env("DIRECTORY_URL", &directory.description)
        .stdout(std::fs::File::create(&report).unwrap())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("node runs");
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(status) = node.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = node.kill();
            let _ = node.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let said = std::fs::read_to_string(&report).unwrap_or_default();
    println!("{said}");
    assert!(
        status.is_some_and(|status| status.success()),
        "node-wot's tests failed or did not end ({status:?}):\n{said}\nweather: {}\nsettings: {}",
        weather.stderr(),
        settings.stderr()
    );
    assert!(said.contains("# fail 0"), "{said}");
}
