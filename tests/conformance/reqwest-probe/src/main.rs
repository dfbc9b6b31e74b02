//! One request with reqwest's default client (system proxies from the environment,
//! read once per process). Prints one JSON line: {"ok":bool,"status":n|null,"error":str|null}.
use std::time::Duration;

fn esc(s: &str) -> String {
    let mut o = String::new();
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o
}

fn main() {
    let url = std::env::args().nth(1).expect("usage: reqwest-probe URL");
    let client = match reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(3))
        .connect_timeout(Duration::from_secs(2))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            println!(
                "{{\"ok\":false,\"status\":null,\"error\":\"build: {}\"}}",
                esc(&format!("{e:?}"))
            );
            return;
        }
    };
    match client.get(&url).send() {
        Ok(r) => println!(
            "{{\"ok\":true,\"status\":{},\"error\":null}}",
            r.status().as_u16()
        ),
        Err(e) => println!(
            "{{\"ok\":false,\"status\":null,\"error\":\"{}\"}}",
            esc(&format!("{e:?}"))
        ),
    }
}
