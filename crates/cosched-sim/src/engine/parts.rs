//! The engine's parts: a node scheduler, a receive wait and a reaction to
//! message arrival, named by each scheme (`crate::scheme`).
//!
//! The parts are type parameters of the engine (monomorphised): each rule
//! they hold is a direct, inlinable call in the hot path, with no scheme test
//! left there. A scheme's runner is `EngineRun::with_parts` (`runner.rs`) at its parts,
//! chosen once per run through the scheme. No part names another: a part's
//! methods are generic over [`super::view::Host`], which reaches the others.

use super::arrival::MessageArrival;
use super::node_scheduler::NodeScheduler;
use super::receive::ReceiveWait;

/// The engine's parts, as one type: `(node scheduler, receive wait, arrival reaction)`.
pub(crate) trait Parts: 'static {
    type Node: NodeScheduler;
    type Wait: ReceiveWait;
    type Arrival: MessageArrival;
}

impl<N: NodeScheduler, W: ReceiveWait, A: MessageArrival> Parts for (N, W, A) {
    type Node = N;
    type Wait = W;
    type Arrival = A;
}
