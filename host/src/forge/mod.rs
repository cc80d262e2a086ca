//! The forge pipeline's stages (validate → build → test → judge →
//! register). So far: the judge stage; the store lives in [`crate::store`].
//! The engine that drives the stages end to end is the pipeline issue's work.

pub mod judge;
