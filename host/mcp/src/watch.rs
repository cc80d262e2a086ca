//! Registry changes made elsewhere, for `notifications/tools/list_changed`.
//!
//! The watch itself is the forge's ([`temper_forge::watch`]): a [`Forge`]
//! owns its registry watch, which keeps the forge's caches current and
//! reads the changes other processes and hosts commit. The transports use
//! it two ways:
//! - a change a request makes holds the watch's cursor
//!   ([`RegistryWatch::local_change`]) until the request has read it back
//!   and announced it (with the transport's fallbacks);
//! - the changes the forge's polls find ([`Forge::subscribe_changes`]) are
//!   announced to the sessions they [`reach`].
//!
//! What counts: registrations and deletions in the agent tier (they concern
//! that agent's sessions) and in the shared tier (everyone's), and
//! promotions to the shared tier. Session tiers belong to one session and
//! are announced there; invocation failures and approvals change no list.
//!
//! [`Forge`]: temper_forge::Forge
//! [`Forge::subscribe_changes`]: temper_forge::Forge::subscribe_changes

pub use temper_forge::watch::{Changes, DEFAULT_POLL, LocalChange, RegistryWatch};

use super::access::Access;
use temper_forge::Forge;
use temper_hub::ListChange;
use temper_store::StoreError;
use tokio::sync::broadcast;

/// Whether a session of `agent`, using the tiers `access` allows, can list
/// something different after `changes`.
pub fn reach(changes: &Changes, agent: &str, access: Access) -> bool {
    changes.reaches_tiers(agent, access.agent, access.shared)
}

/// The forge's registry watch, started to poll every `every` if it does
/// not run yet; with `None`, the forge's watch if it has one, else a watch
/// of this transport's own that does not poll (it reads back the changes
/// this transport's requests make, for their announcements).
pub(crate) async fn of(
    forge: &Forge,
    every: Option<std::time::Duration>,
) -> Result<RegistryWatch, StoreError> {
    if let Some(every) = every {
        let forge = forge.clone();
        return tokio::task::spawn_blocking(move || forge.start_watch(every))
            .await
            .unwrap_or_else(|e| {
                Err(StoreError::Blocking {
                    op: "registry_watch",
                    detail: e.to_string(),
                })
            });
    }
    match forge.registry_watch() {
        Some(w) => Ok(w),
        None => RegistryWatch::start(forge.store_handle()).await,
    }
}

/// Hands every batch of changes the forge's polls find to `deliver` until
/// it returns false or the forge's watch ends; a receiver that fell behind
/// delivers "everything changed" (every agent's shared and agent tiers).
pub(crate) async fn deliver_changes(
    mut changes: broadcast::Receiver<Changes>,
    mut deliver: impl FnMut(Option<Changes>) -> bool,
) {
    loop {
        let keep = match changes.recv().await {
            Ok(c) => deliver(Some(c)),
            Err(broadcast::error::RecvError::Lagged(_)) => deliver(None),
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if !keep {
            return;
        }
    }
}

/// Hands the `list_changed` notification method of each of the hub
/// upstreams' list changes to `deliver` until it returns false or the hub
/// is gone; a receiver that fell behind delivers all three lists.
pub(crate) async fn deliver_hub_changes(
    mut changes: broadcast::Receiver<ListChange>,
    mut deliver: impl FnMut(&'static str) -> bool,
) {
    loop {
        let keep = match changes.recv().await {
            Ok(c) => deliver(c.method()),
            Err(broadcast::error::RecvError::Lagged(_)) => [
                ListChange::Tools,
                ListChange::Resources,
                ListChange::Prompts,
            ]
            .into_iter()
            .all(|c| deliver(c.method())),
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if !keep {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn reach_follows_the_tiers_access_allows() {
        let c = Changes {
            shared: false,
            agents: BTreeSet::from(["alice".to_string()]),
        };
        assert!(reach(&c, "alice", Access::ALL));
        assert!(!reach(&c, "bob", Access::ALL));
        let shared_only = Access {
            session: true,
            agent: false,
            shared: true,
        };
        assert!(!reach(&c, "alice", shared_only));
        let shared = Changes {
            shared: true,
            agents: BTreeSet::new(),
        };
        assert!(reach(&shared, "anyone", shared_only));
        let agent_only = Access {
            session: true,
            agent: true,
            shared: false,
        };
        assert!(!reach(&shared, "anyone", agent_only));
    }
}
