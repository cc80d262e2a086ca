//! The client side of an upstream connection (rmcp's `ClientHandler`):
//! what Temper answers when an upstream asks or tells it something.

use std::future::Future;
use std::sync::Arc;

use rmcp::ClientHandler;
use rmcp::service::{NotificationContext, RoleClient};
use tokio::sync::{Notify, broadcast};

use super::features::ListChange;
use super::relay::{AskRefused, RelayRequests};

/// The client handler: notes `list_changed` (the tools are listed again;
/// resources and prompts changes are announced to Temper's callers);
/// refuses the upstream's requests for elicitation and sampling that the
/// direct path did not relay (see `relay.rs`), naming the upstream, what
/// it asked for and why; notes the
/// upstream's log messages that are not relayed in Temper's log (their
/// level, not their data).
pub(super) struct Handler {
    /// Told when the upstream's tool list changed.
    pub(super) list_changed: Arc<Notify>,
    /// The upstream's table name, for refusals and logs.
    pub(super) upstream: String,
    /// Where changes of its resources and prompts lists are announced.
    pub(super) changes: broadcast::Sender<ListChange>,
    /// Whether the tools file selects any resources, any prompts: the
    /// changes of the others are not announced.
    pub(super) offers: (bool, bool),
    /// Which of its requests may be relayed (the capabilities declared).
    pub(super) relay: RelayRequests,
    /// Whether it is a stdio connection (requests are relayed from those
    /// only, by their direct path).
    pub(super) stdio: bool,
    /// Where the progress of calls made through rmcp goes, by token.
    pub(super) progress: super::ProgressRoutes,
}

impl Handler {
    /// The refusal of the upstream's request `method` (allowed by the
    /// tools file when `allowed`), as rmcp's error.
    fn refusal(&self, method: &str, allowed: bool) -> rmcp::ErrorData {
        let why = if !allowed {
            "Temper does not relay it to its caller (not in the tools file's `relay` for this upstream)"
        } else if !self.stdio {
            "Temper relays requests from stdio upstreams only"
        } else {
            "Temper relays it only during a call that is the only one in flight on this upstream, to a caller that can answer it (it cannot tell whose call asked otherwise)"
        };
        tracing::warn!(upstream = %self.upstream, %method, %why, "an upstream's request refused");
        let refused = AskRefused::new(&self.upstream, method, why);
        rmcp::ErrorData::new(rmcp::model::ErrorCode(refused.code), refused.message, None)
    }
}

impl super::Shared {
    /// The client handler of a connection (`stdio`: a stdio one, whose
    /// direct path relays requests).
    pub(super) fn client_handler(&self, stdio: bool) -> Handler {
        Handler {
            list_changed: self.list_changed.clone(),
            upstream: self.config.name.clone(),
            changes: self.changes.clone(),
            offers: (
                !matches!(self.config.resources, crate::config::ToolSelection::None),
                !matches!(self.config.prompts, crate::config::ToolSelection::None),
            ),
            relay: self.config.relay,
            stdio,
            progress: self.http_progress.clone(),
        }
    }
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.list_changed.notify_one();
        std::future::ready(())
    }

    fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let token = serde_json::to_string(&params.progress_token).unwrap_or_default();
        let to = crate::lock(&self.progress).get(&token).cloned();
        if let (Some(to), Ok(params)) = (to, serde_json::to_value(&params)) {
            // Full: dropped (progress is advisory).
            let _ = to.try_send(super::relay::CallNote::Progress(params));
        }
        std::future::ready(())
    }

    fn on_resource_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        if self.offers.0 {
            // No receiver: nobody listens.
            let _ = self.changes.send(ListChange::Resources);
        }
        std::future::ready(())
    }

    fn on_prompt_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        if self.offers.1 {
            let _ = self.changes.send(ListChange::Prompts);
        }
        std::future::ready(())
    }

    #[allow(
        deprecated,
        reason = "sampling is deprecated by SEP-2577 but servers still send it: refused here"
    )]
    fn create_message(
        &self,
        _params: rmcp::model::CreateMessageRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<rmcp::model::CreateMessageResult, rmcp::ErrorData>> + Send + '_
    {
        std::future::ready(Err(
            self.refusal("sampling/createMessage", self.relay.sampling)
        ))
    }

    fn create_elicitation(
        &self,
        _request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<rmcp::model::ElicitResult, rmcp::ErrorData>> + Send + '_ {
        std::future::ready(Err(
            self.refusal("elicitation/create", self.relay.elicitation)
        ))
    }

    #[allow(
        deprecated,
        reason = "logging is deprecated by SEP-2577 but servers still send it: noted here"
    )]
    fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        // Its data is not logged: it may hold what the upstream was given
        // (a secret of its environment), which only its stderr is cut for.
        tracing::debug!(target: "temper_hub::upstream_log", upstream = %self.upstream, level = ?params.level, logger = ?params.logger, "upstream log message (not relayed: no call it can be attributed to)");
        std::future::ready(())
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default();
        info.client_info.name = "temper".into();
        info.client_info.version = env!("CARGO_PKG_VERSION").into();
        if self.relay.elicitation {
            info.capabilities.elicitation = Some(Default::default());
        }
        if self.relay.sampling {
            info.capabilities.sampling = Some(Default::default());
        }
        info
    }
}
