//! A TCP relay to Postgres that a test can cut (new connections are closed at
//! once, existing ones are broken) and restore, as an outage of the database
//! would look to a service connected through it.

use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

struct State {
    cut: bool,
    /// Cancelled on a cut: every connection relayed so far ends.
    conns: CancellationToken,
}

pub struct Relay {
    port: u16,
    state: Arc<Mutex<State>>,
    stop: CancellationToken,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.cancel();
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .conns
            .cancel();
    }
}

impl Relay {
    /// A relay on a free local port to the test Postgres.
    pub async fn to_postgres() -> anyhow::Result<Relay> {
        let target = reqwest::Url::parse(&crate::admin_database_url())?
            .port()
            .unwrap_or(5432);
        Self::to_port(target).await
    }

    /// A relay on a free local port to 127.0.0.1:`target`.
    pub async fn to_port(target: u16) -> anyhow::Result<Relay> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let state = Arc::new(Mutex::new(State {
            cut: false,
            conns: CancellationToken::new(),
        }));
        let stop = CancellationToken::new();
        let (st, stopped) = (state.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    a = listener.accept() => a,
                    _ = stopped.cancelled() => return,
                };
                let Ok((mut client, _)) = accepted else {
                    continue;
                };
                let token = {
                    let s = st.lock().unwrap_or_else(|p| p.into_inner());
                    if s.cut {
                        // Refused: closed before a byte flows.
                        drop(client);
                        continue;
                    }
                    s.conns.clone()
                };
                tokio::spawn(async move {
                    let Ok(mut server) =
                        tokio::net::TcpStream::connect(("127.0.0.1", target)).await
                    else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        // Broken: both sides are closed mid-conversation.
                        _ = token.cancelled() => {}
                    }
                });
            }
        });
        Ok(Relay { port, state, stop })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Refuse new connections and break every open one.
    pub fn cut(&self) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.cut = true;
        s.conns.cancel();
        s.conns = CancellationToken::new();
    }

    /// Relay new connections again.
    pub fn restore(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).cut = false;
    }
}
