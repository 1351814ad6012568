//! The demo: LLM-style Python snippets calling host tools inside the sandbox.
//!
//! Run with `cargo xtask demo` (which builds the guest first).

use std::time::Instant;

use serde_json::{json, Value};
use wasmbox::{Engine, EngineConfig, Limits, Runtime, Sandbox, Scope, Tool, ToolFailure, Tools};

fn catalogue() -> Value {
    json!([
        {"sku": "kb-1", "name": "mechanical keyboard", "price_eur": 89.0},
        {"sku": "ms-2", "name": "wireless mouse", "price_eur": 25.5},
        {"sku": "mn-3", "name": "27-inch monitor", "price_eur": 219.0},
        {"sku": "hd-4", "name": "usb-c hub", "price_eur": 34.9},
    ])
}

fn tools() -> Tools {
    let mut tools = Tools::new();
    let search_schema = json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]});
    let price_schema = json!({"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]});
    let fx_schema = json!({"type": "object", "properties": {"amount": {"type": "number"}, "to": {"type": "string"}}});
    tools
        .register(Tool::new(
            "search_products",
            "Find products whose name contains the query",
            search_schema,
            |args| async move {
                let query = args["query"].as_str().unwrap_or_default().to_lowercase();
                let hits: Vec<Value> = catalogue()
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|p| p["name"].as_str().unwrap_or_default().contains(&query))
                    .map(|p| json!({"sku": p["sku"], "name": p["name"]}))
                    .collect();
                Ok(json!(hits))
            },
        ))
        .expect("valid tool")
        .register(Tool::new("get_price", "Price of a product in EUR", price_schema, |args| async move {
            catalogue()
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["sku"] == args["sku"])
                .map(|p| p["price_eur"].clone())
                .ok_or_else(|| ToolFailure::new("unknown sku"))
        }))
        .expect("valid tool")
        .register(Tool::new("convert_currency", "Convert EUR to another currency", fx_schema, |args| async move {
            let rate = match args["to"].as_str() {
                Some("USD") => 1.08,
                Some("GBP") => 0.85,
                _ => return Err(ToolFailure::new("unsupported currency")),
            };
            let amount = args["amount"].as_f64().ok_or_else(|| ToolFailure::new("amount must be a number"))?;
            Ok(json!((amount * rate * 100.0).round() / 100.0))
        }))
        .expect("valid tool")
        .register(Tool::new("delete_account", "Never granted to the demo", json!({"type": "object"}), |_| async {
            Ok(json!("deleted!"))
        }))
        .expect("valid tool");
    tools
}

const PYTHON_SNIPPETS: &[(&str, &str)] = &[
    (
        "code mode: many tool calls in one script",
        r#"
hits = tools.search_products(query="o")
total = 0
for hit in hits:
    price = tools.get_price(sku=hit["sku"])
    print(f"{hit['name']:<22} {price:>7.2f} EUR")
    total += price
usd = await tools.convert_currency(amount=total, to="USD")
{"items": len(hits), "total_eur": round(total, 2), "total_usd": usd}
"#,
    ),
    (
        "asyncio.gather and the standard library",
        r#"
import asyncio, statistics
async def prices(skus):
    return await asyncio.gather(*(tools.get_price(sku=s) for s in skus))
ps = await prices(["kb-1", "ms-2", "hd-4"])
{"median": statistics.median(ps), "max": max(ps)}
"#,
    ),
    (
        "a tool outside the scope is a catchable error",
        r#"
try:
    tools.delete_account(user="bob")
except ToolDenied as e:
    output(f"refused: {e}")
"#,
    ),
    ("an uncaught exception", "prices = {}\nprices['kb-1'] * 2"),
    ("an infinite loop hits the deadline", "while True:\n    pass"),
    ("a memory bomb hits the memory cap", "x = 'a' * (1 << 30)"),
    ("the sandbox has no filesystem", "open('/etc/passwd').read()"),
];

const JS_SNIPPETS: &[(&str, &str)] = &[
    (
        "code mode in JavaScript",
        r#"
const hits = await tools.search_products({query: "o"});
const prices = await Promise.all(hits.map(h => tools.get_price({sku: h.sku})));
prices.forEach((p, i) => console.log(`${hits[i].name.padEnd(22)} ${p.toFixed(2).padStart(7)} EUR`));
const total = prices.reduce((a, b) => a + b, 0);
return {items: hits.length, total_gbp: await tools.convert_currency({amount: total, to: "GBP"})};
"#,
    ),
    (
        "a tool outside the scope is a catchable error",
        r#"
try {
  await tools.delete_account({user: "bob"});
} catch (e) {
  if (e instanceof ToolDenied) return `refused: ${e.message}`;
  throw e;
}
"#,
    ),
    (
        "a thrown error",
        "const cart = {};
return cart.items.length",
    ),
    ("an infinite loop hits the deadline", "while (true) {}"),
];

/// A language: its name, how to load its runtime, and its snippets.
type Language = (&'static str, fn(&Engine) -> Result<Runtime, wasmbox::Error>, &'static [(&'static str, &'static str)]);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let engine = Engine::new(EngineConfig::default())?;
    let languages: [Language; 2] =
        [("python", Runtime::python, PYTHON_SNIPPETS), ("js", Runtime::javascript, JS_SNIPPETS)];
    for (language, load, snippets) in languages {
        let started = Instant::now();
        let runtime = load(&engine)?;
        println!("{language} guest ready in {:.1?} (cache: {})\n", started.elapsed(), engine.cache_dir().display());
        let limits = Limits { timeout_ms: 1_000, max_memory_bytes: 128 << 20, ..Limits::default() };
        let sandbox = Sandbox::new(runtime, tools())
            .scope(Scope::only(["search_products", "get_price", "convert_currency"]))
            .limits(limits);
        run_snippets(&sandbox, language, snippets).await;
    }
    Ok(())
}

async fn run_snippets(sandbox: &Sandbox, language: &str, snippets: &[(&str, &str)]) {
    for (title, code) in snippets {
        println!("── [{language}] {title}");
        let outcome = sandbox.run(code).await;
        print!("{}", outcome.stdout.text);
        match (&outcome.value, &outcome.error) {
            (Some(value), None) => println!("=> {} {value}", outcome.status),
            (_, Some(error)) => println!("=> {} {}: {}", outcome.status, error.kind, error.message),
            (None, None) => println!("=> {}", outcome.status),
        }
        println!(
            "   {} tool calls, {:.2} ms wall, {:.2} ms instantiate, {:.1} MiB peak memory\n",
            outcome.tool_calls.len(),
            outcome.stats.wall_time_us as f64 / 1000.0,
            outcome.stats.instantiate_time_us as f64 / 1000.0,
            outcome.stats.peak_memory_bytes as f64 / f64::from(1 << 20)
        );
    }
}
