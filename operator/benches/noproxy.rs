//! NO_PROXY engine figures: render 10,000 mixed intents per dialect, 100,000 explain
//! decisions against a 200-entry NO_PROXY, and the value length for a 5,000-node cluster.
//! Prints figures only (no assertions). Run: cargo bench -p egress-proxy-operator --bench noproxy
//!
//! The last line is `summary: key=value ...`: the slowest dialect's render of the 10,000
//! intents other than `portable`, and `portable`'s (ms, median of five).

use std::hint::black_box;
use std::time::{Duration, Instant};

use egress_proxy_operator::noproxy::bench_intents::{cluster_entries, mixed_entries};
use egress_proxy_operator::noproxy::{Dialect, Env, Intent, IntentSet, Matcher, Target, render};

fn median(mut d: Vec<Duration>) -> Duration {
    d.sort();
    d[d.len() / 2]
}

fn main() {
    let entries = mixed_entries();
    let intents: Vec<Intent> = entries
        .iter()
        .map(|e| Intent::parse(e).expect("bench entries are valid"))
        .collect();

    println!(
        "== render: {} mixed intents (5,000 node IPs, hosts, domains, CIDRs)",
        intents.len()
    );
    let canon = median(
        (0..5)
            .map(|_| {
                let t = Instant::now();
                black_box(IntentSet::new(intents.iter().cloned()));
                t.elapsed()
            })
            .collect(),
    );
    let set = IntentSet::new(intents.iter().cloned());
    println!(
        "canonical set: {} intents, {:.2} ms (parse excluded)",
        set.len(),
        ms(canon)
    );
    println!(
        "{:<22}{:>12}{:>12}{:>12}{:>11}",
        "dialect", "render ms", "+canon ms", "value bytes", "uncovered"
    );
    let (mut worst, mut portable) = (Duration::ZERO, Duration::ZERO);
    for d in Dialect::ALL {
        let t = median(
            (0..5)
                .map(|_| {
                    let t = Instant::now();
                    black_box(render(d, &set));
                    t.elapsed()
                })
                .collect(),
        );
        if d == Dialect::Portable {
            portable = t;
        } else {
            worst = worst.max(t);
        }
        let out = render(d, &set);
        println!(
            "{:<22}{:>12.2}{:>12.2}{:>12}{:>11}",
            d.name(),
            ms(t),
            ms(t + canon),
            out.value.len(),
            out.uncovered.len()
        );
    }

    println!();
    println!("== explain: 100,000 decisions against a 200-entry NO_PROXY");
    let mut np: Vec<String> = Vec::new();
    np.extend((0..80).map(|i| format!(".team-{i}.corp.example")));
    np.extend((0..60).map(|i| format!("svc-{i}.internal")));
    np.extend((0..40).map(|i| format!("10.{i}.0.0/16")));
    np.extend((0..20).map(|i| format!("192.168.{i}.10")));
    let value = np.join(",");
    let env: Env = [
        ("HTTP_PROXY", "http://user:pw@proxy:3128"),
        ("http_proxy", "http://user:pw@proxy:3128"),
        ("HTTPS_PROXY", "http://user:pw@proxy:3128"),
        ("https_proxy", "http://user:pw@proxy:3128"),
        ("NO_PROXY", value.as_str()),
        ("no_proxy", value.as_str()),
    ]
    .into_iter()
    .collect();
    let urls: Vec<String> = (0..1_000)
        .map(|i| match i % 4 {
            0 => format!("http://a{i}.team-{}.corp.example/", i % 120),
            1 => format!("https://svc-{}.internal:8443/x", i % 90),
            2 => format!("http://10.{}.1.{}/", i % 60, i % 250),
            _ => format!("https://api{i}.example.org/"),
        })
        .collect();
    let targets: Vec<Target> = urls
        .iter()
        .map(|u| Target::parse(u).expect("bench URLs are valid"))
        .collect();
    const N: usize = 100_000;
    println!(
        "{:<22}{:>14}{:>16}{:>18}",
        "dialect", "decision ns", "+explanation ns", "+URL parse ns"
    );
    for d in Dialect::ALL {
        let m = Matcher::new(d, &env);
        let t = Instant::now();
        for i in 0..N {
            black_box(m.decision(black_box(&targets[i % targets.len()])));
        }
        let fast = t.elapsed();
        let t = Instant::now();
        for i in 0..N {
            let k = i % targets.len();
            black_box(m.decide(black_box(&targets[k]), &urls[k]));
        }
        let full = t.elapsed();
        let t = Instant::now();
        for i in 0..N {
            let k = i % targets.len();
            if let Ok(tg) = Target::parse(black_box(&urls[k])) {
                black_box(m.decide(&tg, &urls[k]));
            }
        }
        let parsed = t.elapsed();
        println!(
            "{:<22}{:>14.0}{:>16.0}{:>18.0}",
            d.name(),
            ns_each(fast, N),
            ns_each(full, N),
            ns_each(parsed, N)
        );
    }

    println!();
    println!("== value length for a 5,000-node cluster");
    let cluster = cluster_entries();
    let set = IntentSet::parse(cluster.iter().map(String::as_str)).expect("valid");
    println!(
        "{:<22}{:>12}{:>11}  warnings",
        "dialect", "bytes", "uncovered"
    );
    for d in Dialect::ALL {
        let out = render(d, &set);
        println!(
            "{:<22}{:>12}{:>11}  {}",
            d.name(),
            out.value.len(),
            out.uncovered.len(),
            out.warnings.len()
        );
    }

    println!();
    println!(
        "summary: render_10k_ms_worst_dialect={:.2} render_10k_ms_portable={:.2}",
        ms(worst),
        ms(portable)
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn ns_each(d: Duration, n: usize) -> f64 {
    d.as_secs_f64() * 1e9 / n as f64
}
