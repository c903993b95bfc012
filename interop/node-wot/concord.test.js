// Concord's agents consumed by node-wot 0.9.2 over the WoT HTTP binding.
//
// Driven by `cargo test -p concord-cli --test node_wot -- --ignored` (which `.ci/run` runs
// after `npm ci` here): it serves the WeatherAgent example, the product agent and
// settings-agent.toml with `concord serve` and passes their base URLs as WEATHER_URL,
// PRODUCT_URL and SETTINGS_URL, and the description URL of a `concord directory serve`
// they are registered in as DIRECTORY_URL.
"use strict";

const { test, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { Servient } = require("@node-wot/core");
const { HttpClientFactory } = require("@node-wot/binding-http");

const need = (name) => {
    const value = process.env[name];
    if (!value) {
        throw new Error(`${name} is not set: run this through the node_wot Rust test`);
    }
    return value;
};

/** The description URL of an agent served at `base` (ending in `/`). */
const described = (base) => `${base}.well-known/wot`;

let servient;
let WoT;

before(async () => {
    servient = new Servient();
    servient.addClientFactory(new HttpClientFactory(null));
    WoT = await servient.start();
});

after(async () => {
    await servient.shutdown();
});

/** Consumes the agent served at the URL in the environment variable `name`. */
async function consume(name) {
    const td = await WoT.requestThingDescription(described(need(name)));
    return WoT.consume(td);
}

/**
 * Subscribes with `subscribe(listener)` and resolves with the first value the listener
 * gets, within `ms`; the subscription is stopped then (an open EventSource would keep
 * this process alive, reconnecting).
 */
async function firstValue(subscribe, ms) {
    let first;
    const got = new Promise((resolve, reject) => {
        first = { resolve, reject };
    });
    const subscription = await subscribe(async (output) => {
        try {
            first.resolve(await output.value());
        } catch (error) {
            first.reject(error);
        }
    });
    let timer;
    const timeout = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`nothing within ${ms} ms`)), ms);
    });
    return {
        value: Promise.race([got, timeout]).finally(async () => {
            clearTimeout(timer);
            await subscription.stop();
        }),
    };
}

test("the WeatherAgent's description is requested and consumed", async () => {
    const weather = await consume("WEATHER_URL");
    const td = weather.getThingDescription();
    assert.equal(td.title, "WeatherAgent");
    assert.equal(td["@context"][0], "https://www.w3.org/2019/wot/td/v1");
    assert.ok(td.actions.getWeather && td.actions.forecastReport && td.actions.logFeedback);
});

test("a request-reply action answers its output", async () => {
    const weather = await consume("WEATHER_URL");
    const output = await weather.invokeAction("getWeather", {
        question: "What is the weather in Berlin?",
        interactionMode: "text",
    });
    const answer = await output.value();
    assert.equal(typeof answer, "string");
    assert.match(answer, /Berlin/);
});

test("a schema-invalid input is refused", async () => {
    const weather = await consume("WEATHER_URL");
    await assert.rejects(weather.invokeAction("getWeather", { question: 42, interactionMode: "text" }), /400|Bad Request|invalid/i);
});

test("a progress action answers 201; its status resource is polled to completed", async () => {
    const weather = await consume("WEATHER_URL");
    // node-wot 0.9.2 has no ActionInteractionOutput.query(): the 201's body carries the
    // status resource (also its Location), which is polled with fetch.
    const output = await weather.invokeAction("forecastReport", { city: "Berlin", days: 2 });
    const started = await output.value();
    assert.equal(started.status, "pending");
    assert.ok(started.href.startsWith(need("WEATHER_URL")), started.href);
    let status;
    for (let i = 0; i < 200; i++) {
        const response = await fetch(started.href);
        assert.equal(response.status, 200);
        status = await response.json();
        if (status.status === "completed" || status.status === "failed") break;
        await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal(status.status, "completed", JSON.stringify(status));
    assert.equal(status.output.city, "Berlin");
    assert.equal(status.output.days.length, 2);
});

test("a notify action publishes an event a subscriber receives over SSE", async () => {
    const weather = await consume("WEATHER_URL");
    // The subscription is open once subscribeEvent resolved.
    const received = await firstValue(
        (listener) => weather.subscribeEvent("userFeedbackReceived", listener),
        10000
    );
    const output = await weather.invokeAction("logFeedback", { rating: 5, comment: "node-wot" });
    // A notify action answers once it ran (204: no output).
    assert.ok(output);
    const event = await received.value;
    assert.equal(event.rating, 5);
});

test("the product agent's action is invoked", async () => {
    const product = await consume("PRODUCT_URL");
    const output = await product.invokeAction("getProductInfo", { productId: "P12345" });
    const info = await output.value();
    assert.equal(info.productName, "Laptop");
});

test("a property is read, written and observed", async () => {
    const settings = await consume("SETTINGS_URL");
    const read = await settings.readProperty("targetTemperature");
    assert.equal(await read.value(), 20);
    const changed = await firstValue(
        (listener) => settings.observeProperty("targetTemperature", listener),
        10000
    );
    await settings.writeProperty("targetTemperature", 22.5);
    assert.equal(await changed.value, 22.5);
    const again = await settings.readProperty("targetTemperature");
    assert.equal(await again.value(), 22.5);
    // A value its schema refuses is refused.
    await assert.rejects(settings.writeProperty("targetTemperature", 99), /400|Bad Request|invalid/i);
});

test("a directory finds the agents", async () => {
    // node-wot reads the directory's `things` property once (no paging, no filter).
    const things = [];
    for await (const td of await WoT.exploreDirectory(need("DIRECTORY_URL"))) {
        things.push(td.title);
    }
    for (const title of ["WeatherAgent", "Product agent", "Settings agent"]) {
        assert.ok(things.includes(title), `${title} in ${things.join(", ")}`);
    }
});
