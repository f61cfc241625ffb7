//! A setting of the cuDNN path that the environment gives at its first read and the program may
//! change after (`LEROBOT_RS_CUDNN_GRAPH`, `LEROBOT_RS_CONV1D`): one of a few values, kept as an
//! atomic index into them.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};

/// One of `values`, read by `from_environment` at the first [`Choice::get`] or [`Choice::set`].
pub(super) struct Choice<T: 'static> {
    values: &'static [T],
    from_environment: fn() -> T,
    current: OnceLock<AtomicU8>,
}

impl<T: Copy + PartialEq> Choice<T> {
    /// A setting among `values` (every value the type has), first `from_environment`'s.
    pub(super) const fn new(values: &'static [T], from_environment: fn() -> T) -> Self {
        Self { values, from_environment, current: OnceLock::new() }
    }

    /// The value now.
    pub(super) fn get(&self) -> T {
        self.values[usize::from(self.index().load(Ordering::Relaxed))]
    }

    /// Sets the value from now on.
    pub(super) fn set(&self, value: T) {
        self.index().store(self.position(value), Ordering::Relaxed);
    }

    fn index(&self) -> &AtomicU8 {
        self.current.get_or_init(|| AtomicU8::new(self.position((self.from_environment)())))
    }

    fn position(&self, value: T) -> u8 {
        let at = self.values.iter().position(|v| *v == value);
        at.and_then(|at| u8::try_from(at).ok()).expect("a Choice lists every value of its type")
    }
}
