//! Request bodies: JSON of the handler's type, or a 400 that says what is
//! wrong with it.

use service_kit::{ApiError, ApiResult};

/// A JSON body of type `T`, or a 400 that says what is wrong with it.
pub fn body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    serde_json::from_slice(bytes).map_err(|e| {
        let msg = e.to_string();
        // serde's message names the field; the position adds nothing.
        let msg = msg
            .split(" at line ")
            .next()
            .unwrap_or("malformed JSON body");
        ApiError::BadRequest(format!("invalid body: {msg}"))
    })
}
