//! Group commit for orders: each order is one server row, its provisioning
//! job (API SKUs), its `server.created` event (history and outbox) and its
//! audit event, in one transaction. Storing each order in a transaction of
//! its own made every order pay a commit and eight round trips to Postgres
//! (the SKU, BEGIN, five INSERTs, COMMIT), which is most of what an order
//! costs the machine. `orders.writers` tasks each take the orders waiting at
//! that moment (up to `orders.max_batch`) and store them in one transaction,
//! one multi-row statement per table ([`servers::store::insert_orders`]); an
//! order is answered only after the commit that holds it. An order whose
//! hostname a live server of its organization holds (the partial unique
//! index [`servers::HOSTNAME_PER_ORG`], `ON CONFLICT DO NOTHING`: already
//! stored, or earlier in the same batch) is refused (409) with nothing of it
//! written, without affecting the others. A batch fails only as a whole, for
//! infrastructure reasons (a 500 to each; nothing of it committed). Orders of
//! one organization go to one writer. The writers are the kit's group commit
//! ([`service_kit::group_commit`]).
//!
//! The server cap (`orders.max_servers_per_org`): the INSERT's trigger
//! counts the new servers into `org_servers` (taking each organization's row
//! lock until commit, in organization order); the batch then reads its
//! organizations' counts and removes, in the same transaction, the last
//! orders of an organization past its cap ([`Placed::CapReached`], a 409).
//! A concurrent batch of another replica waits for the row lock and reads
//! the count with this batch's servers in it. No order counts servers.

use crate::servers::{self, store, Row};
use event_contracts::SERVER_CREATED;
use hub_domain::{OrgId, ServerId, UserId};
use service_kit::{
    group_commit::{Batch, GroupCommit, Shape},
    metrics::CommitMetrics,
    outbox, ApiError,
};
use sqlx::PgPool;
use std::collections::{HashMap, HashSet};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

/// One order to store, made in the request: the server as it will be stored,
/// and what goes with it.
pub struct Order {
    pub row: Row,
    pub created_by: UserId,
    /// API-fulfilled: a provisioning job, due at once.
    pub job: bool,
    /// Its `server.created` event.
    pub created: servers::Event,
    /// Its audit event.
    pub audit: outbox::Message,
}

/// What became of an order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    Stored,
    /// A live server of the organization has the hostname: nothing stored.
    HostnameTaken,
    /// The organization has as many live servers as its cap: nothing stored.
    CapReached,
}

/// The orders' writers: submit with [`Orders::place`].
#[derive(Clone)]
pub struct Orders(GroupCommit<Writer>);

impl Orders {
    /// Start the writers; they stop when every `Orders` clone is gone (after
    /// storing what was queued), or when `cancel` fires.
    pub fn spawn(
        pool: PgPool,
        writers: usize,
        max_batch: usize,
        max_servers_per_org: i64,
        cancel: CancellationToken,
        metrics: CommitMetrics,
    ) -> (Orders, Vec<tokio::task::JoinHandle<()>>) {
        let shape = Shape {
            writers,
            max_batch,
            // Past the HTTP server's 10-second graceful shutdown: the orders
            // of requests it still finishes are stored.
            grace: std::time::Duration::from_secs(11),
        };
        let (w, tasks) = GroupCommit::spawn(shape, cancel, metrics, || Writer {
            pool: pool.clone(),
            cap: max_servers_per_org,
        });
        (Orders(w), tasks)
    }

    /// Store `o` with whatever else is waiting; returns once committed.
    pub async fn place(&self, o: Order) -> Result<Placed, ApiError> {
        self.0.submit(o.row.org_id.as_uuid().as_u128(), o).await?
    }
}

/// One writer's batch of orders.
pub struct Writer {
    pool: PgPool,
    /// Live servers per organization (0: no cap).
    cap: i64,
}

impl Batch for Writer {
    type Item = Order;
    type Output = Result<Placed, ApiError>;
    /// An order whose requester went away is stored all the same, as a
    /// handler of its own would have stored it (its retry meets the hostname).
    const DROP_ABANDONED: bool = false;

    fn name(&self) -> &'static str {
        "server-product-orders"
    }

    async fn apply(&mut self, batch: &[Order]) -> Vec<Self::Output> {
        match store_batch(&self.pool, batch, self.cap).await {
            Ok(placed) => placed.into_iter().map(Ok).collect(),
            // Each order answers what its own transaction would have: an
            // outage (Postgres unreachable) a 503 with Retry-After, anything
            // else a 500 (each logged with the error when answered).
            Err(err) => {
                let outage = service_kit::outage::classify(&err);
                batch
                    .iter()
                    .map(|_| {
                        Err(match &outage {
                            Some(o) => ApiError::Outage(o.clone()),
                            None => ApiError::internal(anyhow::anyhow!(
                                "storing a batch of {} orders failed: {err:#}",
                                batch.len()
                            )),
                        })
                    })
                    .collect()
            }
        }
    }
}

/// Store the batch in one transaction; what became of each order.
async fn store_batch(pool: &PgPool, batch: &[Order], cap: i64) -> anyhow::Result<Vec<Placed>> {
    let mut tx = pool.begin().await?;
    let rows: Vec<&Row> = batch.iter().map(|o| &o.row).collect();
    let created_by: Vec<UserId> = batch.iter().map(|o| o.created_by).collect();
    let mut inserted: HashSet<ServerId> = store::insert_servers(&mut tx, &rows, &created_by)
        .await?
        .into_iter()
        .collect();
    let over = if cap > 0 && !inserted.is_empty() {
        past_cap(&mut tx, batch, &inserted, cap).await?
    } else {
        HashSet::new()
    };
    if !over.is_empty() {
        let ids: Vec<ServerId> = over.iter().copied().collect();
        store::delete_servers(&mut tx, &ids).await?;
        inserted.retain(|id| !over.contains(id));
    }
    let placed: Vec<Placed> = batch
        .iter()
        .map(|o| {
            if inserted.contains(&o.row.id) {
                Placed::Stored
            } else if over.contains(&o.row.id) {
                Placed::CapReached
            } else {
                Placed::HostnameTaken
            }
        })
        .collect();
    let kept: Vec<&Order> = batch
        .iter()
        .filter(|o| inserted.contains(&o.row.id))
        .collect();
    if !kept.is_empty() {
        let (jobs, due): (Vec<ServerId>, Vec<OffsetDateTime>) = kept
            .iter()
            .filter(|o| o.job)
            .map(|o| (o.row.id, o.row.created_at))
            .unzip();
        if !jobs.is_empty() {
            store::enqueue_jobs(&mut tx, &jobs, &due).await?;
        }
        store::insert_events(&mut tx, SERVER_CREATED, kept.iter().map(|o| &o.created)).await?;
        outbox::enqueue_messages(
            &mut tx,
            kept.iter().flat_map(|o| [&o.created.message, &o.audit]),
        )
        .await?;
    }
    tx.commit().await?;
    Ok(placed)
}

/// The orders of the batch (among `inserted`) that put their organization
/// past `cap`: each organization's last ones, as many as it is over (its
/// count, read under the row lock the INSERT took, includes them).
async fn past_cap(
    tx: &mut sqlx::PgConnection,
    batch: &[Order],
    inserted: &HashSet<ServerId>,
    cap: i64,
) -> anyhow::Result<HashSet<ServerId>> {
    let mut orgs: Vec<OrgId> = batch
        .iter()
        .filter(|o| inserted.contains(&o.row.id))
        .map(|o| o.row.org_id)
        .collect();
    orgs.sort_unstable();
    orgs.dedup();
    let live: HashMap<OrgId, i64> = store::live_servers(tx, &orgs).await?.into_iter().collect();
    let mut over = HashSet::new();
    for org in orgs {
        let mut excess = live.get(&org).copied().unwrap_or(0) - cap;
        for o in batch.iter().rev() {
            if excess <= 0 {
                break;
            }
            if o.row.org_id == org && inserted.contains(&o.row.id) {
                over.insert(o.row.id);
                excess -= 1;
            }
        }
    }
    Ok(over)
}
