//! A stand-in HTTP/1.1 server on a local port for the delivery client's
//! tests: it records each request's head and answers 200.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};

pub struct Stub {
    pub port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Stub {
    pub async fn start() -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let heads: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = heads.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    // Read the head (and whatever body came with it).
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        if buf.len() > 1 << 16 {
                            break;
                        }
                    }
                    if buf.is_empty() {
                        return;
                    }
                    let text = String::from_utf8_lossy(&buf);
                    let head = text.split("\r\n\r\n").next().unwrap_or_default().to_owned();
                    if let Ok(mut s) = seen.lock() {
                        s.push(head);
                    }
                    let _ = sock
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        )
                        .await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        Stub { port, heads }
    }

    /// The request heads received so far (first line first).
    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().map(|h| h.clone()).unwrap_or_default()
    }
}

/// An error with its sources, for assertions on why a request failed.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
