//! The model-backed engine's provider: OpenAI-compatible chat completions with
//! tool calling (`POST {base_url}/chat/completions`). The tools offered are
//! exactly the [`Op`]s the rule-based matcher uses; staff tools only to staff.

use crate::{ops::Op, state::AppState};
use secrecy::ExposeSecret;
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::Duration;

/// Why the provider gave no usable answer (the rules answer instead).
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("the model provider did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the model provider is unreachable: {0}")]
    Unreachable(String),
    #[error("the model provider answered {0}")]
    Status(u16),
    #[error("the model provider's answer is malformed: {0}")]
    Malformed(String),
}

/// One completion: the assistant message and its cost.
#[derive(Debug, Clone)]
pub struct Completion {
    /// The assistant message as the provider gave it (kept for the next round).
    pub message: Value,
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    /// Tokens the call used (the provider's count, else an estimate).
    pub tokens: i64,
}

#[derive(Debug, Clone)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

fn function(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    json!({"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required,
                       "additionalProperties": false}}})
}

/// The tools offered to the model (staff tools only for staff).
pub fn tools(staff: bool) -> Vec<Value> {
    let mut t = member_tools();
    if staff {
        t.extend(staff_tools());
    }
    t
}

/// Every caller's tools.
fn member_tools() -> Vec<Value> {
    let org = json!({"type": "string", "description": "organization name or id; omit for the request's organization"});
    vec![
        function(
            "wallet_balance",
            "The wallet balance of an organization (finance role).",
            json!({"org": org}),
            &[],
        ),
        function(
            "token_balance",
            "The AI-token balance of an organization.",
            json!({"org": org}),
            &[],
        ),
        function(
            "list_organizations",
            "The caller's organizations with role, country and KYC status.",
            json!({}),
            &[],
        ),
        function(
            "kyc_status",
            "The KYC status of an organization.",
            json!({"org": org}),
            &[],
        ),
        function(
            "list_sessions",
            "The caller's active sessions.",
            json!({}),
            &[],
        ),
        function("profile", "The caller's profile.", json!({}), &[]),
        function(
            "set_job_title",
            "Set the caller's job title (runs at once, audited).",
            json!({"text": {"type": "string"}}),
            &["text"],
        ),
        function(
            "set_bio",
            "Set the caller's bio (runs at once, audited).",
            json!({"text": {"type": "string"}}),
            &["text"],
        ),
        function(
            "create_org",
            "Prepare creating an organization; the user must confirm.",
            json!({
            "name": {"type": "string"},
            "country": {"type": "string", "description": "country name or ISO alpha-2 code"},
            "legal_type": {"type": "string", "enum": ["corporate", "individual"]}}),
            &["name", "country"],
        ),
        function(
            "credit_wallet",
            "Prepare a wallet credit; the user must confirm.",
            json!({
            "org": {"type": "string"},
            "amount": {"type": "string", "description": "amount in major units, e.g. 1500.00"},
            "currency": {"type": "string", "description": "TRY, EUR or USD"}}),
            &["org", "amount", "currency"],
        ),
        function(
            "grant_tokens",
            "Prepare an AI-token grant; the user must confirm.",
            json!({
            "org": {"type": "string"}, "amount": {"type": "string"}}),
            &["org", "amount"],
        ),
        function(
            "revoke_session",
            "Prepare revoking one of the caller's sessions; the user must confirm.",
            json!({"session_id": {"type": "string"}}),
            &["session_id"],
        ),
        function(
            "search_knowledge_base",
            "The platform's published help articles (English and Turkish) matching the words; answer from them.",
            json!({"query": {"type": "string", "description": "the user's words, at most 200 characters"}}),
            &["query"],
        ),
    ]
}

/// Platform tools for staff.
fn staff_tools() -> [Value; 3] {
    [
        function(
            "kyc_queue",
            "Staff: KYC submissions pending review.",
            json!({}),
            &[],
        ),
        function(
            "find_organization",
            "Staff: any organization by name or id.",
            json!({"query": {"type": "string"}}),
            &["query"],
        ),
        function(
            "fulfilment_queue",
            "Staff: manual server orders waiting for fulfilment.",
            json!({}),
            &[],
        ),
    ]
}

/// The operation a tool call names, if it is one of ours with usable
/// arguments: each required one present with its type, each optional one
/// absent (or null) or of its type. A mistyped optional argument is not taken
/// for an absent one (`org: 5` is not "the request's organization").
pub fn op_of(call: &ToolCall) -> Option<Op> {
    let a = &call.arguments;
    let s = |k: &str| a[k].as_str().map(str::to_owned);
    let opt = |k: &str| match a.get(k) {
        None | Some(Value::Null) => Some(None),
        Some(Value::String(v)) => Some(Some(v.clone())),
        Some(_) => None,
    };
    let n = |k: &str| match &a[k] {
        Value::String(v) => Some(v.clone()),
        Value::Number(v) => Some(v.to_string()),
        _ => None,
    };
    Some(match call.name.as_str() {
        "wallet_balance" => Op::WalletBalance { org: opt("org")? },
        "token_balance" => Op::TokenBalance { org: opt("org")? },
        "list_organizations" => Op::ListOrgs,
        "kyc_status" => Op::KycStatus { org: opt("org")? },
        "list_sessions" => Op::ListSessions,
        "profile" => Op::Profile,
        "set_job_title" => Op::SetJobTitle { text: s("text")? },
        "set_bio" => Op::SetBio { text: s("text")? },
        "create_org" => Op::CreateOrg {
            name: s("name")?,
            country: s("country")?,
            legal_type: opt("legal_type")?,
        },
        "credit_wallet" => Op::CreditWallet {
            org: s("org")?,
            amount: n("amount")?,
            currency: s("currency")?,
        },
        "grant_tokens" => Op::GrantTokens {
            org: s("org")?,
            amount: n("amount")?,
        },
        "revoke_session" => Op::RevokeSession {
            session_id: s("session_id")?,
        },
        "kyc_queue" => Op::KycQueue,
        "find_organization" => Op::FindOrg { query: s("query")? },
        "fulfilment_queue" => Op::FulfilmentQueue,
        "search_knowledge_base" => Op::SearchKb { query: s("query")? },
        _ => return None,
    })
}

#[derive(Deserialize)]
struct Response {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    message: Value,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    total_tokens: Option<i64>,
}

/// What is left of the caller's wait for a provider call: the gateway's
/// deadline less a second for the rest of the request, at most
/// `model.timeout_ms`. None when too little is left to try.
pub fn budget(state: &AppState, time_left: Option<Duration>) -> Option<Duration> {
    let configured = Duration::from_millis(state.model.timeout_ms);
    let budget = match time_left {
        Some(left) => configured.min(left.saturating_sub(Duration::from_secs(1))),
        None => configured,
    };
    (budget >= Duration::from_millis(100)).then_some(budget)
}

/// One chat-completions call with `messages` (and the tools, when given),
/// given up after `timeout`.
pub async fn complete(
    state: &AppState,
    model: &str,
    messages: &[Value],
    tools: Option<&[Value]>,
    timeout: Duration,
) -> Result<Completion, ProviderError> {
    let r = call(state, model, messages, tools, timeout).await;
    let (outcome, tokens) = match &r {
        Ok(c) => ("ok", u64::try_from(c.tokens).unwrap_or(0)),
        Err(ProviderError::Timeout(_)) => ("timeout", 0),
        Err(ProviderError::Unreachable(_)) => ("unreachable", 0),
        Err(ProviderError::Status(_)) => ("status", 0),
        Err(ProviderError::Malformed(_)) => ("malformed", 0),
    };
    state.model_metrics.observe(model, outcome, tokens);
    r
}

async fn call(
    state: &AppState,
    model: &str,
    messages: &[Value],
    tools: Option<&[Value]>,
    timeout: Duration,
) -> Result<Completion, ProviderError> {
    let url = format!(
        "{}/chat/completions",
        state.model.base_url.trim_end_matches('/')
    );
    let mut body =
        json!({"model": model, "messages": messages, "max_tokens": state.model.max_tokens});
    if let Some(t) = tools {
        body["tools"] = json!(t);
        body["tool_choice"] = json!("auto");
    }
    let mut rb = state.http.post(&url).timeout(timeout).json(&body);
    if let Some(k) = &state.model.api_key {
        rb = rb.bearer_auth(k.expose_secret());
    }
    let resp = rb.send().await.map_err(|e| {
        if e.is_timeout() {
            ProviderError::Timeout(timeout)
        } else {
            ProviderError::Unreachable(e.without_url().to_string())
        }
    })?;
    if !resp.status().is_success() {
        return Err(ProviderError::Status(resp.status().as_u16()));
    }
    let bytes = resp.bytes().await.map_err(|e| {
        if e.is_timeout() {
            ProviderError::Timeout(timeout)
        } else {
            ProviderError::Unreachable(e.without_url().to_string())
        }
    })?;
    completion(&bytes, messages)
}

/// A provider's answer to `messages` as a [`Completion`]. Every field read is
/// there with its type, or the answer is [`ProviderError::Malformed`] naming
/// it; only what the protocol leaves out on purpose may be absent (`usage`,
/// then estimated; `tool_calls`, when the model calls none).
fn completion(bytes: &[u8], messages: &[Value]) -> Result<Completion, ProviderError> {
    let r: Response =
        serde_json::from_slice(bytes).map_err(|e| ProviderError::Malformed(e.to_string()))?;
    let message = r
        .choices
        .into_iter()
        .next()
        .map(|c| c.message)
        .ok_or_else(|| ProviderError::Malformed("no choices".into()))?;
    if !message.is_object() {
        return Err(malformed("choices[0].message", "is not an object"));
    }
    // Null when the model only calls tools; never left out.
    let content = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) => String::new(),
        Some(_) => return Err(malformed("choices[0].message.content", "is not a string")),
        None => return Err(malformed("choices[0].message.content", "is missing")),
    };
    let tool_calls = tool_calls(&message)?;
    let estimate = || {
        let chars: usize =
            messages.iter().map(|m| m.to_string().len()).sum::<usize>() + message.to_string().len();
        (chars / 4).max(1) as i64
    };
    let tokens = r
        .usage
        .and_then(|u| u.total_tokens)
        .filter(|t| *t > 0)
        .unwrap_or_else(estimate);
    Ok(Completion {
        message,
        content,
        tool_calls,
        tokens,
    })
}

/// [`ProviderError::Malformed`]: the answer's `field` (its path) `is` so.
fn malformed(field: &str, is: &str) -> ProviderError {
    ProviderError::Malformed(format!("{field} {is}"))
}

/// The tool calls an assistant message asks for (none when it has no
/// `tool_calls`, or null). Each call needs its `id`, `function.name` and
/// `function.arguments` (a JSON object, sent as a string); a call without
/// them makes the answer malformed.
fn tool_calls(message: &Value) -> Result<Vec<ToolCall>, ProviderError> {
    let calls = match message.get("tool_calls") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(calls)) => calls,
        Some(_) => {
            return Err(malformed(
                "choices[0].message.tool_calls",
                "is not an array",
            ))
        }
    };
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let text = |v: &Value, field: &str| {
                v.as_str().map(str::to_owned).ok_or_else(|| {
                    malformed(
                        &format!("choices[0].message.tool_calls[{i}].{field}"),
                        "is missing or not a string",
                    )
                })
            };
            let id = text(&c["id"], "id")?;
            let name = text(&c["function"]["name"], "function.name")?;
            let raw = text(&c["function"]["arguments"], "function.arguments")?;
            // The protocol sends arguments as a JSON string; an empty one is
            // a call without arguments.
            let arguments = if raw.trim().is_empty() {
                Value::Object(Default::default())
            } else {
                match serde_json::from_str::<Value>(&raw) {
                    Ok(v @ Value::Object(_)) => v,
                    _ => {
                        return Err(malformed(
                            &format!("choices[0].message.tool_calls[{i}].function.arguments"),
                            "is not a JSON object",
                        ))
                    }
                }
            };
            Ok(ToolCall {
                id,
                name,
                arguments,
            })
        })
        .collect()
}

/// One text the model writes from `instruction` and `input` (no tools), when a
/// provider is configured and answers with something; None otherwise (the
/// caller then writes its rule-based text). `what` names it in the log.
pub async fn write(state: &AppState, what: &str, instruction: &str, input: &str) -> Option<String> {
    let timeout = Duration::from_millis(state.model.timeout_ms);
    compose(state, what, instruction, input, timeout)
        .await
        .map(|c| c.content)
}

/// [`write`] with its cost (the completion), given up after `timeout`. No
/// database connection is held while the provider works (only the model's
/// name is read, before).
pub async fn compose(
    state: &AppState,
    what: &str,
    instruction: &str,
    input: &str,
    timeout: Duration,
) -> Option<Completion> {
    if !state.provider() {
        return None;
    }
    let messages = [
        json!({"role": "system", "content": instruction}),
        json!({"role": "user", "content": input}),
    ];
    let name = current(state).await.ok()?;
    match complete(state, &name, &messages, None, timeout).await {
        Ok(c) if !c.content.trim().is_empty() => Some(c),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(error = %e, what, "the model did not write it; the rule-based text stands");
            None
        }
    }
}

/// The model to use: staff's choice, else configuration's.
pub async fn current(state: &AppState) -> sqlx::Result<String> {
    let chosen = crate::store::model::chosen(&state.pool).await?;
    Ok(chosen.unwrap_or_else(|| state.model.model.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_maps_to_an_operation() {
        for t in tools(true) {
            let name = t["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let args = json!({"org": "Acme", "text": "x", "name": "A", "country": "DE",
                              "amount": "5", "currency": "EUR", "session_id": "s", "query": "q"});
            let call = ToolCall {
                id: "1".into(),
                name: name.clone(),
                arguments: args,
            };
            assert!(op_of(&call).is_some(), "{name}");
        }
        assert_eq!(tools(false).len() + 3, tools(true).len());
        let unknown = ToolCall {
            id: "1".into(),
            name: "drop_tables".into(),
            arguments: json!({}),
        };
        assert!(op_of(&unknown).is_none());
        // A mistyped optional argument is not an absent one.
        let call = |arguments| ToolCall {
            id: "1".into(),
            name: "wallet_balance".into(),
            arguments,
        };
        assert_eq!(
            op_of(&call(json!({}))),
            Some(Op::WalletBalance { org: None })
        );
        assert_eq!(
            op_of(&call(json!({"org": null}))),
            Some(Op::WalletBalance { org: None })
        );
        assert_eq!(op_of(&call(json!({"org": 5}))), None);
    }

    fn answer(message: Value) -> Result<Completion, ProviderError> {
        let body = json!({"choices": [{"index": 0, "message": message}]});
        completion(body.to_string().as_bytes(), &[])
    }

    #[test]
    fn a_well_formed_answer_is_read_as_given() {
        let c = answer(json!({"role": "assistant", "content": "hi"})).expect("text");
        assert_eq!((c.content.as_str(), c.tool_calls.len()), ("hi", 0));
        let c = answer(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "profile", "arguments": ""}},
            {"id": "c2", "type": "function",
             "function": {"name": "wallet_balance", "arguments": "{\"org\": \"Acme\"}"}}]}))
        .expect("tool calls");
        assert_eq!(c.content, "");
        assert_eq!(
            c.tool_calls
                .iter()
                .map(|t| (t.id.as_str(), t.name.as_str(), t.arguments.clone()))
                .collect::<Vec<_>>(),
            [
                ("c1", "profile", json!({})),
                ("c2", "wallet_balance", json!({"org": "Acme"}))
            ]
        );
    }

    #[test]
    fn a_malformed_answer_is_an_error_naming_the_field() {
        let call = |function: Value| json!({"content": null, "tool_calls": [function]});
        for (message, field) in [
            (json!("hi"), "choices[0].message is not an object"),
            (
                json!({"role": "assistant"}),
                "choices[0].message.content is missing",
            ),
            (
                json!({"content": ["hi"]}),
                "choices[0].message.content is not a string",
            ),
            (
                json!({"content": null, "tool_calls": {}}),
                "choices[0].message.tool_calls is not an array",
            ),
            (
                call(json!({"function": {"name": "profile", "arguments": "{}"}})),
                "tool_calls[0].id is missing",
            ),
            (
                call(json!({"id": "c1", "function": {"arguments": "{}"}})),
                "tool_calls[0].function.name is missing",
            ),
            (
                call(json!({"id": "c1", "function": {"name": "profile"}})),
                "tool_calls[0].function.arguments is missing",
            ),
            (
                call(json!({"id": "c1", "function": {"name": "profile", "arguments": "{nope"}})),
                "tool_calls[0].function.arguments is not a JSON object",
            ),
            (
                call(json!({"id": "c1", "function": {"name": "profile", "arguments": "[1]"}})),
                "tool_calls[0].function.arguments is not a JSON object",
            ),
        ] {
            match answer(message.clone()) {
                Err(ProviderError::Malformed(m)) => assert!(m.contains(field), "{message}: {m}"),
                other => panic!("{message}: {other:?}"),
            }
        }
    }
}
