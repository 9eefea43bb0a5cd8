//! The first-come first-served arrival queue. Strict: the caller admits from
//! the head only, so a job that does not fit blocks every job behind it (no
//! backfilling), as in the reference study.

use std::collections::VecDeque;

#[derive(Clone, Debug)]
pub struct FcfsQueue<T> {
    waiting: VecDeque<T>,
    longest: usize,
}

impl<T> Default for FcfsQueue<T> {
    fn default() -> Self {
        FcfsQueue { waiting: VecDeque::new(), longest: 0 }
    }
}

impl<T> FcfsQueue<T> {
    pub fn push(&mut self, item: T) {
        self.waiting.push_back(item);
        self.longest = self.longest.max(self.waiting.len());
    }

    pub fn front(&self) -> Option<&T> {
        self.waiting.front()
    }
    pub fn pop(&mut self) -> Option<T> {
        self.waiting.pop_front()
    }
    pub fn len(&self) -> usize {
        self.waiting.len()
    }
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
    /// The longest the queue has been.
    pub fn longest(&self) -> usize {
        self.longest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_in_first_out_and_longest_length() {
        let mut q = FcfsQueue::default();
        for job in [4, 1, 1] {
            q.push(job);
        }
        assert_eq!(q.front(), Some(&4));
        assert_eq!(q.pop(), Some(4));
        q.push(7);
        let order: Vec<i32> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![1, 1, 7]);
        assert_eq!(q.longest(), 3);
        assert!(q.is_empty());
    }
}
