//! gclb-readiness: Pod readiness gates from load balancer health, in its own crate so that its
//! tests (and each of its mutants, `make mutants`) build without the rest of the operator.
//!
//! `readiness`: the `cloud.google.com/load-balancer-neg-ready` condition, from the NEG endpoint
//! health the Compute API reports. gclb-operator (`run`, `webhook`) wires it to its stores and
//! re-exports it as `gclb_operator::readiness`. This crate depends on nothing of the operator's
//! (layers import only downward): the translation layer says which NEGs a Pod belongs to, and
//! `gclb-sync` names the client in its `User-Agent`.

pub mod readiness;

// The layers below, at the paths the modules name them by (`crate::translate::..`,
// `crate::USER_AGENT`).
use gclb_sync::USER_AGENT;
use gclb_translate::translate;
