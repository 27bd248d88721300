//! Each service's Postgres role reaches its own schema only; the one-process
//! stack stops whole when a service fails.

use tests_e2e::TestStack;

async fn as_role(s: &TestStack, role: &str) -> sqlx::PgPool {
    let url = hub_stack::role_url(&s.database_url, role).expect("role url");
    sqlx::PgPool::connect(&url).await.expect("connect as role")
}

#[tokio::test]
async fn each_service_role_reads_its_own_schema_only() {
    let s = TestStack::spawn().await;
    let (_, _org) = s.org_with_owner("isolated@example.com").await;
    let identity = as_role(&s, "hub_identity").await;
    let billing = as_role(&s, "hub_org_billing").await;
    let kyc = as_role(&s, "hub_kyc").await;
    let users: i64 = sqlx::query_scalar!(r#"SELECT count(*) AS "v!" FROM identity.users"#)
        .fetch_one(&identity)
        .await
        .expect("identity reads its own tables");
    assert!(users >= 1);
    for (pool, sql) in [
        (&identity, "SELECT count(*) FROM org_billing.wallets"),
        (&identity, "SELECT count(*) FROM org_billing.organizations"),
        (&billing, "SELECT count(*) FROM identity.sessions"),
        (&billing, "SELECT count(*) FROM identity.api_keys"),
        (&billing, "SELECT count(*) FROM kyc.submissions"),
        (&kyc, "SELECT count(*) FROM org_billing.organizations"),
        (&kyc, "SELECT count(*) FROM identity.users"),
    ] {
        // Runtime strings: each read of the list must be refused.
        let err = sqlx::query_scalar::<_, i64>(sql)
            .fetch_one(pool)
            .await
            .expect_err("another service's schema is out of reach");
        assert!(
            err.to_string().contains("permission denied"),
            "{sql}: {err}"
        );
    }
    // Nor can a role write into another schema.
    let err = sqlx::query!("CREATE TABLE org_billing.sneaky (x int)")
        .execute(&identity)
        .await
        .expect_err("no create");
    assert!(err.to_string().contains("permission denied"), "{err}");
    // The services' tables belong to their roles.
    let owners: Vec<(String, String)> = sqlx::query!(
        r#"SELECT DISTINCT schemaname::text AS "c0!", tableowner::text AS "c1!" FROM pg_tables
         WHERE schemaname IN ('identity', 'org_billing', 'kyc') ORDER BY 1"#,
    )
    .fetch_all(&s.db)
    .await
    .map(|v| v.into_iter().map(|r| (r.c0, r.c1)).collect::<Vec<_>>())
    .expect("owners");
    assert_eq!(
        owners,
        [
            ("identity".to_owned(), "hub_identity".to_owned()),
            ("kyc".to_owned(), "hub_kyc".to_owned()),
            ("org_billing".to_owned(), "hub_org_billing".to_owned())
        ]
    );
}

#[tokio::test]
async fn a_service_that_cannot_start_stops_the_whole_stack_with_its_error() {
    let s = TestStack::spawn().await;
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut extra = std::collections::BTreeMap::new();
    // org-billing with a key too short to use (and a usable sealing key, so
    // that the short key is what stops it): it fails to start.
    extra.insert(
        "org_billing".to_owned(),
        vec!["[assertion]\nkeys = [\"short\"]\n\
             [sealing]\nkeys = [\"t1:aXNvbGF0aW9uLXRlc3Qtc2VhbGluZy1rZXktMzJieXQ=\"]\n\
             search_key = \"isolation-test-tax-id-search-key-32-chars\"\n"
            .to_owned()],
    );
    let started = hub_stack::Stack::start(hub_stack::StackConfig {
        source: hub_stack::Source::Generated,
        common: vec![format!(
            "[http]\nhost = \"127.0.0.1\"\nport = 0\nmetrics_port = 0\nworkers = 1\n\
             [product_http]\nhost = \"127.0.0.1\"\nport = 0\nworkers = 1\n\
             [nats]\nurl = \"{}\"\nsubject_prefix = \"{}\"\nstream_suffix = \"{}\"\nmemory_storage = true\n",
            tests_e2e::nats_url(),
            s.naming.subject_prefix,
            s.naming.stream_suffix
        )],
        extra,
        database_admin_url: Some(s.database_url.clone()),
        gateways: 1,
        runtime: service_kit::Runtime::new(cancel.clone()),
    })
    .await;
    let err = match started {
        Ok(_) => panic!("the stack started without org-billing"),
        Err(e) => format!("{e:#}"),
    };
    assert!(err.contains("starting org_billing"), "{err}");
    assert!(err.contains("at least 16 bytes"), "{err}");
    assert!(
        cancel.is_cancelled(),
        "identity, already started, is stopped too"
    );
}

#[tokio::test]
async fn provisioning_hands_an_older_schema_to_its_role() {
    // A database from before per-service roles: the schema and its objects
    // belong to the administrator.
    let s = TestStack::spawn().await;
    let admin_url = s.database_url.replace(
        s.database_url
            .rsplit('/')
            .next()
            .expect("rsplit yields one part"),
        &tests_e2e::runs::database_name(),
    );
    let name = admin_url
        .rsplit('/')
        .next()
        .expect("rsplit yields one part")
        .to_owned();
    let server = sqlx::PgPool::connect(&tests_e2e::admin_database_url())
        .await
        .expect("admin");
    // DDL on generated names and a list of legacy objects: runtime strings.
    sqlx::query(&format!("CREATE DATABASE \"{name}\""))
        .execute(&server)
        .await
        .expect("create database");
    let old = sqlx::PgPool::connect(&admin_url).await.expect("connect");
    for sql in [
        "CREATE SCHEMA identity",
        "CREATE TABLE identity.t (id bigserial PRIMARY KEY, v text)",
        "CREATE SEQUENCE identity.standalone",
        "CREATE VIEW identity.v AS SELECT id FROM identity.t",
        "CREATE FUNCTION identity.f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    ] {
        sqlx::query(sql).execute(&old).await.expect(sql);
    }
    let settings: service_kit::settings::DatabaseSettings = service_kit::settings::from_toml(&[
        &format!(
            "url = {:?}\nadmin_url = {admin_url:?}\nmax_connections = 2\nmin_connections = 0\nacquire_timeout_ms = 3000\n",
            hub_stack::role_url(&admin_url, "hub_identity").expect("url")
        ),
    ])
    .expect("settings");
    // Twice: it is idempotent.
    for _ in 0..2 {
        service_kit::db::provision(&settings, "identity")
            .await
            .expect("provision");
    }
    let owners: Vec<String> = sqlx::query_scalar!(
        r#"SELECT DISTINCT pg_get_userbyid(c.relowner)::text AS "v!" FROM pg_class c
         JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'identity'
         UNION SELECT DISTINCT pg_get_userbyid(p.proowner)::text FROM pg_proc p
         JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'identity'
         UNION SELECT pg_get_userbyid(nspowner)::text FROM pg_namespace WHERE nspname = 'identity'"#,
    )
    .fetch_all(&old)
    .await
    .expect("owners");
    assert_eq!(owners, ["hub_identity"]);
    old.close().await;
    sqlx::query(&format!("DROP DATABASE \"{name}\" WITH (FORCE)"))
        .execute(&server)
        .await
        .expect("drop");
}
