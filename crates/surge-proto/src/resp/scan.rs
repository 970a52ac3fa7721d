//! Finding where a whole reply ends, resumably.

use super::decode::{read_header, Header, Status};
use super::error::Error;
use super::limits::MAX_NESTING;

/// An open aggregate: values it still owes, and whether it is an attribute
/// (which does not count as a value of its parent: the value after it does).
#[derive(Clone, Copy, Debug)]
struct Open {
    owed: u64,
    attribute: bool,
}

/// Walks the headers of one reply. Call [`scan`](Scanner::scan) with the same
/// buffer grown by new reads until it answers the reply's length; it resumes
/// after the last whole header it saw. Then start over at the next reply
/// (`scan` resets itself on `Complete` and on an error).
#[derive(Clone, Debug, Default)]
pub struct Scanner {
    pos: usize,
    stack: Vec<Open>,
}

impl Scanner {
    pub fn new() -> Self {
        Self::default()
    }

    /// Forget a reply scanned halfway (the buffer it was scanning is gone).
    pub fn reset(&mut self) {
        self.pos = 0;
        self.stack.clear();
    }

    /// The length of the whole reply at the front of `buf`, or `Partial`.
    pub fn scan(&mut self, buf: &[u8]) -> Result<Status<usize>, Error> {
        let r = self.step(buf);
        if !matches!(r, Ok(Status::Partial)) {
            self.reset();
        }
        r
    }

    fn step(&mut self, buf: &[u8]) -> Result<Status<usize>, Error> {
        loop {
            let h = match read_header(buf, &mut self.pos)? {
                Status::Complete(h) => h,
                Status::Partial => return Ok(Status::Partial),
            };
            let attribute = matches!(h, Header::Attribute(_));
            let owed = h.children();
            if owed > 0 || attribute {
                if self.stack.len() >= MAX_NESTING {
                    return Err(Error::TooDeep);
                }
                if owed > 0 {
                    self.stack.push(Open { owed, attribute });
                }
                // An empty attribute leaves the value it describes still to come.
                continue;
            }
            // A whole value: pay it to the open aggregates, closing the paid ones.
            loop {
                let Some(top) = self.stack.last_mut() else {
                    return Ok(Status::Complete(self.pos));
                };
                top.owed -= 1;
                if top.owed > 0 {
                    break;
                }
                let closed = self.stack.pop().expect("top exists");
                if closed.attribute {
                    break; // the described value comes next, and pays the parent
                }
            }
        }
    }
}
