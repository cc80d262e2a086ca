//! Test databases on the throw-away PostgreSQL cluster that
//! `scripts/with-postgres.sh` starts (its URL in `TEMPER_TEST_PG_URL`).
//! Every test gets a database of its own, so tests run in parallel.
//!
//! Without `TEMPER_TEST_PG_URL` a PostgreSQL test prints a skip line and
//! returns, unless `TEMPER_REQUIRE_PG=1` (as `scripts/test.sh` sets), in
//! which case it fails.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio_postgres::NoTls;

/// The cluster's URL (any database; the tests create their own).
pub(crate) const URL_ENV: &str = "TEMPER_TEST_PG_URL";
/// `1`: a PostgreSQL test without [`URL_ENV`] fails instead of skipping.
pub(crate) const REQUIRE_ENV: &str = "TEMPER_REQUIRE_PG";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The cluster URL, or `None` after printing why the test is skipped.
pub(crate) fn cluster_url(test: &str) -> Option<String> {
    match std::env::var(URL_ENV) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var(REQUIRE_ENV).as_deref() != Ok("1"),
                "{test}: {REQUIRE_ENV}=1 but {URL_ENV} is not set: run the tests through scripts/with-postgres.sh"
            );
            eprintln!(
                "SKIP {test}: {URL_ENV} is not set; run through scripts/with-postgres.sh to test the PostgreSQL backend"
            );
            None
        }
    }
}

/// `url` with its database replaced by `dbname`.
pub(crate) fn with_dbname(url: &str, dbname: &str) -> String {
    let mut u = url::Url::parse(url).expect("TEMPER_TEST_PG_URL must be a postgres:// URL");
    u.set_path(&format!("/{dbname}"));
    u.to_string()
}

/// Runs `sql` (one or more statements, one implicit transaction) on `url`
/// with a plain client on a thread of its own, so that it works from any
/// context. Returns the server's error text on failure.
pub(crate) fn try_exec(url: &str, sql: &str) -> Result<(), String> {
    let (url, sql) = (url.to_owned(), sql.to_owned());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let (client, conn) = tokio_postgres::connect(&url, NoTls)
                .await
                .map_err(|e| super::describe(&e))?;
            let conn = tokio::spawn(conn);
            let r = client
                .batch_execute(&sql)
                .await
                .map_err(|e| super::describe(&e));
            drop(client);
            let _ = conn.await;
            r
        })
    })
    .join()
    .unwrap()
}

/// The first column of the first row of `sql` on `url`, as an i64.
pub(crate) fn query_i64(url: &str, sql: &str) -> i64 {
    let (url, sql) = (url.to_owned(), sql.to_owned());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let (client, conn) = tokio_postgres::connect(&url, NoTls).await.unwrap();
            let conn = tokio::spawn(conn);
            let row = client.query_one(&sql, &[]).await.unwrap();
            let v: i64 = row.get(0);
            drop(client);
            let _ = conn.await;
            v
        })
    })
    .join()
    .unwrap()
}

/// A fresh database, dropped (with its connections) when this is dropped.
#[derive(Debug)]
pub(crate) struct TestDb {
    admin_url: String,
    /// The database's name.
    pub(crate) name: String,
    /// Its URL, with the cluster's credentials.
    pub(crate) url: String,
}

impl TestDb {
    /// A new empty database for `test`, or `None` (skip) without a cluster.
    pub(crate) fn create(test: &str) -> Option<TestDb> {
        let admin_url = cluster_url(test)?;
        let name = format!(
            "temper_t{}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        );
        try_exec(&admin_url, &format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("{test}: CREATE DATABASE {name}: {e}"));
        let url = with_dbname(&admin_url, &name);
        Some(TestDb {
            admin_url,
            name,
            url,
        })
    }

    /// Runs `sql` on this database (see [`try_exec`]); panics on failure.
    pub(crate) fn exec(&self, sql: &str) {
        try_exec(&self.url, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// Runs `sql` with the audit table's triggers disabled (what an
    /// attacker with the table owner's rights can do).
    pub(crate) fn tamper(&self, sql: &str) {
        self.exec(&format!(
            "ALTER TABLE audit DISABLE TRIGGER USER; {sql}; ALTER TABLE audit ENABLE TRIGGER USER;"
        ));
    }

    /// See [`query_i64`].
    pub(crate) fn scalar(&self, sql: &str) -> i64 {
        query_i64(&self.url, sql)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let _ = try_exec(
            &self.admin_url,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}
