//! Reference routes for benchmarks, measured in the same run as the real ones:
//! `GET /bare` (a JSON body, nothing else) and `GET /select` (one primary-key
//! SELECT on a pooled connection). Usage: baseline <port> <database-url>.

use actix_web::{web, App, HttpResponse, HttpServer};
use sqlx::PgPool;

async fn bare() -> HttpResponse {
    HttpResponse::Ok().json(serde_json::json!({"ok": true}))
}

async fn select(pool: web::Data<PgPool>) -> HttpResponse {
    // Runtime strings, as in the services before compile-time checking: this
    // binary is the benchmarks' reference route, and its table (made below)
    // belongs to no service schema that the macros could check against.
    let row: Result<(uuid::Uuid, String), _> =
        sqlx::query_as("SELECT id, email FROM bench_rows WHERE id = $1")
            .bind(uuid::Uuid::nil())
            .fetch_one(pool.get_ref())
            .await;
    match row {
        Ok((id, email)) => HttpResponse::Ok().json(serde_json::json!({"id": id, "email": email})),
        Err(e) => HttpResponse::InternalServerError().body(e.to_string()),
    }
}

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().unwrap_or_else(|| "8099".into()).parse()?;
    let url = args
        .next()
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/hub_bench".into());
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(20)
        .connect(&url)
        .await?;
    sqlx::query("CREATE TABLE IF NOT EXISTS bench_rows (id uuid PRIMARY KEY, email text NOT NULL)")
        .execute(&pool)
        .await?;
    sqlx::query("INSERT INTO bench_rows VALUES ($1, 'bench@example.com') ON CONFLICT DO NOTHING")
        .bind(uuid::Uuid::nil())
        .execute(&pool)
        .await?;
    let pool = web::Data::new(pool);
    HttpServer::new(move || {
        App::new()
            .app_data(pool.clone())
            .route("/bare", web::get().to(bare))
            .route("/select", web::get().to(select))
    })
    .bind(("127.0.0.1", port))?
    .run()
    .await?;
    Ok(())
}
