//! The client side of an upstream connection (rmcp's `ClientHandler`):
//! what Temper answers when an upstream asks or tells it something.

use std::future::Future;
use std::sync::Arc;

use rmcp::ClientHandler;
use rmcp::service::{NotificationContext, RoleClient};
use tokio::sync::Notify;

/// The client handler: notes `list_changed`; refuses the upstream's own
/// requests for sampling and elicitation (Temper's client declares neither
/// capability, so a conforming server does not send them), naming the
/// upstream and what it asked for; notes the upstream's log messages in
/// Temper's log (their level, not their data; they are not relayed).
pub(super) struct Handler {
    /// Told when the upstream's tool list changed.
    pub(super) list_changed: Arc<Notify>,
    /// The upstream's table name, for refusals and logs.
    pub(super) upstream: String,
}

impl Handler {
    /// The refusal of the upstream's request `method`.
    fn refusal(&self, method: &str) -> rmcp::ErrorData {
        tracing::warn!(upstream = %self.upstream, %method, "an upstream's request refused: Temper does not relay it to its caller");
        rmcp::ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            format!(
                "upstream \"{}\" asked for {method}, which Temper does not relay to its caller (its client declares no such capability)",
                self.upstream
            ),
            None,
        )
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
        std::future::ready(Err(self.refusal("sampling/createMessage")))
    }

    fn create_elicitation(
        &self,
        _request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<rmcp::model::ElicitResult, rmcp::ErrorData>> + Send + '_ {
        std::future::ready(Err(self.refusal("elicitation/create")))
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
        tracing::debug!(target: "temper_hub::upstream_log", upstream = %self.upstream, level = ?params.level, logger = ?params.logger, "upstream log message (not relayed)");
        std::future::ready(())
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default();
        info.client_info.name = "temper".into();
        info.client_info.version = env!("CARGO_PKG_VERSION").into();
        info
    }
}
