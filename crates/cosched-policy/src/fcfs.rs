//! The first-come first-served arrival queue. Strict: a job that does not fit
//! blocks every job behind it (no backfilling), as in the reference study.

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

    /// Admit jobs from the head while `try_admit` accepts them; stop at the
    /// first refusal. Returns how many were admitted.
    pub fn admit_in_order(&mut self, mut try_admit: impl FnMut(&T) -> bool) -> usize {
        let mut admitted = 0;
        while let Some(head) = self.waiting.front() {
            if !try_admit(head) {
                break;
            }
            self.waiting.pop_front();
            admitted += 1;
        }
        admitted
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
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.waiting.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_of_line_blocks_later_jobs() {
        let mut q = FcfsQueue::default();
        for size in [4, 1, 1] {
            q.push(size);
        }
        let mut free = 2;
        let admitted = q.admit_in_order(|&size| {
            if size <= free {
                free -= size;
                true
            } else {
                false
            }
        });
        assert_eq!(admitted, 0, "the 4-wide head must block the 1-wide jobs behind it");
        free = 4;
        let admitted = q.admit_in_order(|&size| {
            if size <= free {
                free -= size;
                true
            } else {
                false
            }
        });
        assert_eq!(admitted, 1);
        assert_eq!(q.len(), 2);
        assert_eq!(q.longest(), 3);
    }
}
