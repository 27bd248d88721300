//! What the agent reports beyond the kit's metrics: calls to the model
//! provider by engine (the model's name) and outcome, and the tokens they
//! cost.

use service_kit::metrics::{IntCounterVec, Metrics};

#[derive(Clone)]
pub struct ModelMetrics {
    calls: IntCounterVec,
    tokens: IntCounterVec,
}

impl ModelMetrics {
    pub fn new(m: &Metrics) -> ModelMetrics {
        ModelMetrics {
            calls: m.counter(
                "hub_agent_model_calls_total",
                "Calls to the model provider by engine and outcome (ok, timeout, unreachable, status, malformed).",
                &["engine", "outcome"],
            ),
            tokens: m.counter(
                "hub_agent_model_tokens_total",
                "Tokens the model provider reported (or the agent estimated) for its answers, by engine.",
                &["engine"],
            ),
        }
    }

    /// One call to `engine` that ended as `outcome`, costing `tokens`.
    pub fn observe(&self, engine: &str, outcome: &str, tokens: u64) {
        if tokens > 0 {
            self.tokens.with_label_values(&[engine]).inc_by(tokens);
        }
        self.calls.with_label_values(&[engine, outcome]).inc();
    }
}
