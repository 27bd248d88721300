//! Request bodies as the handlers read them.

use serde_json::Value;
use service_kit::ApiError;

/// A JSON body read after authorization (so that a caller without the right
/// learns nothing from how a body is refused); an empty body is `null`.
pub(super) fn json_body(bytes: &[u8]) -> Result<Value, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(bytes).map_err(|_| ApiError::bad_request("malformed JSON body"))
}
