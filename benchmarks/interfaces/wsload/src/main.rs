//! wsload: opens N WebSocket connections to an echo endpoint; each sends a small text
//! message and waits for its echo, in a loop (or keeps several in flight), for D seconds.
//! Prints one JSON object: messages/s and round-trip latency percentiles.
//!
//! wsload --url ws://127.0.0.1:8000/ws [--connections 1000] [--seconds 5] [--inflight 1] [--size 16]

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

struct Args {
    url: String,
    connections: usize,
    seconds: f64,
    inflight: usize,
    size: usize,
}

fn parse_args() -> Args {
    let mut args = Args {
        url: "ws://127.0.0.1:8000/ws".into(),
        connections: 1000,
        seconds: 5.0,
        inflight: 1,
        size: 16,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--url" => args.url = value,
            "--connections" => args.connections = value.parse().expect("--connections"),
            "--seconds" => args.seconds = value.parse().expect("--seconds"),
            "--inflight" => args.inflight = value.parse().expect("--inflight"),
            "--size" => args.size = value.parse().expect("--size"),
            _ => panic!("unknown flag {flag}"),
        }
    }
    args
}

#[derive(Default)]
struct Tally {
    messages: u64,
    errors: u64,
    latencies_us: Vec<u32>,
}

async fn one_connection(
    url: String,
    payload: String,
    inflight: usize,
    mut window: tokio::sync::watch::Receiver<Option<(Instant, Instant)>>,
    ready: tokio::sync::oneshot::Sender<bool>,
) -> Tally {
    let mut tally = Tally::default();
    let ws = match tokio_tungstenite::connect_async(url.as_str()).await {
        Ok((ws, _)) => ws,
        Err(_) => {
            let _ = ready.send(false);
            tally.errors += 1;
            return tally;
        }
    };
    let _ = ready.send(true);
    let mut ws = ws;
    // the clock starts once every connection is open (or has failed)
    let (start, end) = match window.wait_for(|w| w.is_some()).await {
        Ok(w) => w.unwrap(),
        Err(_) => return tally,
    };
    tokio::time::sleep_until(start.into()).await;
    let mut sent: VecDeque<Instant> = VecDeque::with_capacity(inflight);
    for _ in 0..inflight {
        if ws.feed(Message::Text(payload.clone())).await.is_err() {
            tally.errors += 1;
            return tally;
        }
        sent.push_back(Instant::now());
    }
    if ws.flush().await.is_err() {
        tally.errors += 1;
        return tally;
    }
    let deadline = tokio::time::sleep_until(end.into());
    tokio::pin!(deadline);
    loop {
        let msg = tokio::select! {
            _ = &mut deadline => break,
            msg = ws.next() => msg,
        };
        match msg {
            Some(Ok(Message::Text(text))) if text.len() == payload.len() => {
                let now = Instant::now();
                if let Some(t0) = sent.pop_front() {
                    tally.messages += 1;
                    tally
                        .latencies_us
                        .push((now - t0).as_micros().min(u32::MAX as u128) as u32);
                }
                if now >= end {
                    break;
                }
                if ws.send(Message::Text(payload.clone())).await.is_err() {
                    tally.errors += 1;
                    break;
                }
                sent.push_back(Instant::now());
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            _ => {
                tally.errors += 1;
                break;
            }
        }
    }
    let _ = ws.close(None).await;
    tally
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = parse_args();
    let payload: String = "x".repeat(args.size);
    let (window_tx, window_rx) = tokio::sync::watch::channel(None::<(Instant, Instant)>);
    let mut tasks = Vec::with_capacity(args.connections);
    let mut readies = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        let (tx, rx) = tokio::sync::oneshot::channel();
        readies.push(rx);
        tasks.push(tokio::spawn(one_connection(
            args.url.clone(),
            payload.clone(),
            args.inflight,
            window_rx.clone(),
            tx,
        )));
    }
    let mut open = 0usize;
    for rx in readies {
        if rx.await.unwrap_or(false) {
            open += 1;
        }
    }
    let t0 = Instant::now() + Duration::from_millis(100);
    let t1 = t0 + Duration::from_secs_f64(args.seconds);
    let _ = window_tx.send(Some((t0, t1)));
    let mut total = Tally::default();
    for task in tasks {
        if let Ok(t) = task.await {
            total.messages += t.messages;
            total.errors += t.errors;
            total.latencies_us.extend(t.latencies_us);
        }
    }
    total.latencies_us.sort_unstable();
    let l = &total.latencies_us;
    println!(
        "{{\"connections\": {}, \"open\": {}, \"inflight\": {}, \"size\": {}, \"seconds\": {}, \
         \"messages\": {}, \"messages_per_sec\": {:.1}, \"errors\": {}, \
         \"latency_ms\": {{\"p50\": {:.3}, \"p90\": {:.3}, \"p99\": {:.3}, \"max\": {:.3}}}}}",
        args.connections,
        open,
        args.inflight,
        args.size,
        args.seconds,
        total.messages,
        total.messages as f64 / args.seconds,
        total.errors,
        percentile(l, 0.50),
        percentile(l, 0.90),
        percentile(l, 0.99),
        percentile(l, 1.0),
    );
}
