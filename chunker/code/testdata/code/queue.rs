//! A bounded work queue with priorities, for a job runner.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fmt;
use std::time::{Duration, Instant};

/// How urgent a job is; higher runs first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Priority {
    Low = 0,
    Normal = 1,
    High = 2,
}

pub const DEFAULT_CAPACITY: usize = 1024;

/// A job waiting to run.
#[derive(Debug)]
pub struct Job {
    pub id: u64,
    pub priority: Priority,
    pub enqueued: Instant,
    pub payload: Vec<u8>,
}

impl PartialEq for Job {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for Job {}

impl Ord for Job {
    // Higher priority first; among equals, the job that waited longest.
    fn cmp(&self, other: &Self) -> Ordering {
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.enqueued.cmp(&self.enqueued))
            .then_with(|| other.id.cmp(&self.id))
    }
}

impl PartialOrd for Job {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Why a job was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum QueueError {
    Full { capacity: usize },
    Empty,
}

impl fmt::Display for QueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueError::Full { capacity } => write!(f, "queue is full ({capacity} jobs)"),
            QueueError::Empty => write!(f, "queue is empty"),
        }
    }
}

impl std::error::Error for QueueError {}

pub trait Metrics {
    fn job_waited(&mut self, priority: Priority, waited: Duration);
    fn job_refused(&mut self) {}
}

/// The queue itself.
pub struct Queue<M: Metrics> {
    heap: BinaryHeap<Job>,
    capacity: usize,
    next_id: u64,
    metrics: M,
}

impl<M: Metrics> Queue<M> {
    pub fn new(capacity: usize, metrics: M) -> Self {
        let capacity = if capacity == 0 { DEFAULT_CAPACITY } else { capacity };
        Queue { heap: BinaryHeap::with_capacity(capacity), capacity, next_id: 1, metrics }
    }

    pub fn push(&mut self, priority: Priority, payload: Vec<u8>) -> Result<u64, QueueError> {
        if self.heap.len() >= self.capacity {
            self.metrics.job_refused();
            return Err(QueueError::Full { capacity: self.capacity });
        }
        let id = self.next_id;
        self.next_id += 1;
        self.heap.push(Job { id, priority, enqueued: Instant::now(), payload });
        Ok(id)
    }

    pub fn pop(&mut self) -> Result<Job, QueueError> {
        let job = self.heap.pop().ok_or(QueueError::Empty)?;
        self.metrics.job_waited(job.priority, job.enqueued.elapsed());
        Ok(job)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

macro_rules! count_by_priority {
    ($queue:expr, $p:expr) => {
        $queue.heap.iter().filter(|j| j.priority == $p).count()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoMetrics;

    impl Metrics for NoMetrics {
        fn job_waited(&mut self, _: Priority, _: Duration) {}
    }

    #[test]
    fn high_priority_first() {
        let mut q = Queue::new(4, NoMetrics);
        q.push(Priority::Low, vec![1]).unwrap();
        q.push(Priority::High, vec![2]).unwrap();
        assert_eq!(count_by_priority!(q, Priority::High), 1);
        assert_eq!(q.pop().unwrap().payload, vec![2]);
    }
}
