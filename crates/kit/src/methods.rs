//! Routes by method, and 405 for the others.
//!
//! Every route is registered with one of [`get`], [`post`], [`put`], [`patch`]
//! or [`delete`] (instead of actix's `web::get()`, ...): the same method guard,
//! which also notes the method in the request as served on its path whenever
//! the router tried that route (it tries a route only when the path matched).
//! A request that no route took therefore knows whether its path exists with
//! other methods: [`not_allowed`] answers it 405 with those methods in `Allow`
//! and a JSON `{"error"}`, and only a path no route has is a 404. The services'
//! default service and the gateway's own routes (the probes) both use it.

use crate::error::json_error;
use actix_web::{
    guard::{Guard, GuardContext},
    http::{header, Method, StatusCode},
    web, HttpMessage, HttpRequest, HttpResponse, Route,
};

/// The methods the request's path is served with, as far as the router
/// looked (every route of that path when no route took the request).
#[derive(Clone, Debug, Default)]
pub struct Served(pub Vec<Method>);

/// A method guard that notes its method in [`Served`].
struct Serves(Method);

impl Guard for Serves {
    fn check(&self, ctx: &GuardContext<'_>) -> bool {
        let mut ext = ctx.req_data_mut();
        match ext.get_mut::<Served>() {
            Some(s) if !s.0.contains(&self.0) => s.0.push(self.0.clone()),
            Some(_) => {}
            None => {
                ext.insert(Served(vec![self.0.clone()]));
            }
        }
        ctx.head().method == self.0
    }
}

fn serving(m: Method) -> Route {
    web::route().guard(Serves(m))
}

/// A GET route (`.route("/v1/x", methods::get().to(handler))`).
pub fn get() -> Route {
    serving(Method::GET)
}

/// A POST route.
pub fn post() -> Route {
    serving(Method::POST)
}

/// A PUT route.
pub fn put() -> Route {
    serving(Method::PUT)
}

/// A PATCH route.
pub fn patch() -> Route {
    serving(Method::PATCH)
}

/// A DELETE route.
pub fn delete() -> Route {
    serving(Method::DELETE)
}

/// For a request no route took: 405 `{"error"}` with `Allow` when its path is
/// served with other methods; `None` when no route has the path.
pub fn not_allowed(req: &HttpRequest) -> Option<HttpResponse> {
    let served = req.extensions().get::<Served>().cloned()?;
    let allow = served
        .0
        .iter()
        .map(Method::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    let mut resp = json_error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    if let Ok(v) = header::HeaderValue::from_str(&allow) {
        resp.headers_mut().insert(header::ALLOW, v);
    }
    Some(resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::{test, App};

    async fn ok() -> HttpResponse {
        HttpResponse::Ok().finish()
    }

    async fn fallback(req: HttpRequest) -> HttpResponse {
        not_allowed(&req).unwrap_or_else(|| json_error(StatusCode::NOT_FOUND, "no such route"))
    }

    #[actix_web::test]
    async fn another_method_on_a_served_path_is_a_405_naming_the_served_ones() {
        let app = test::init_service(
            App::new()
                .route("/v1/x/{id}", get().to(ok))
                .route("/v1/x/{id}", patch().to(ok))
                .route("/v1/y", post().to(ok))
                .default_service(web::to(fallback)),
        )
        .await;
        let call = |m: Method, p: &'static str| test::TestRequest::default().method(m).uri(p);
        let r = test::call_service(&app, call(Method::GET, "/v1/x/1").to_request()).await;
        assert_eq!(r.status(), 200);
        let r = test::call_service(&app, call(Method::DELETE, "/v1/x/1").to_request()).await;
        assert_eq!(r.status(), 405);
        assert_eq!(
            r.headers().get(header::ALLOW).map(|v| v.as_bytes()),
            Some(&b"GET, PATCH"[..])
        );
        let body: serde_json::Value = test::read_body_json(r).await;
        assert_eq!(body["error"], "method not allowed");
        let r = test::call_service(&app, call(Method::GET, "/v1/y").to_request()).await;
        assert_eq!(r.status(), 405);
        assert_eq!(
            r.headers().get(header::ALLOW).map(|v| v.as_bytes()),
            Some(&b"POST"[..])
        );
        let r = test::call_service(&app, call(Method::GET, "/v1/z").to_request()).await;
        assert_eq!(r.status(), 404);
        assert!(r.headers().get(header::ALLOW).is_none());
    }
}
