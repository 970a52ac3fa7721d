//! The receiving side: bytes in, whole messages out.
//!
//! | state                  | input                          | next / result                      |
//! |------------------------|--------------------------------|------------------------------------|
//! | between frames         | a frame header                 | in a frame (rules below checked)   |
//! | in a control frame     | its whole payload              | between frames; Ping, Pong, Close  |
//! | in a data frame        | any part of its payload        | unmasked into the message, checked |
//! | end of a FIN data frame| -                              | between frames; Text or Binary     |
//! | closed (Close returned)| anything                       | ignored, `Partial`                 |
//! | failed(e)              | anything                       | ignored, error e                   |
//!
//! Rules checked on a header: text/binary only outside a message, continuation
//! only inside one, RSV1 only on a message's first frame and only with
//! permessage-deflate, the message's size so far plus the announced payload
//! within the limit (so an oversized frame fails before its payload comes).

use super::close::{self, CloseFrame};
use super::deflate::Inflater;
use super::extensions::PerMessageDeflate;
use super::frame::{apply_mask, parse_header, FrameHeader, MessageKind, Opcode, Role};
use super::limits::{COMPRESSED_SLACK, DEFAULT_MAX_MESSAGE_SIZE};
use super::{utf8, Error, Status};

/// One received message. It borrows the decoder until the next `poll` or
/// `feed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    Text(&'a str),
    Binary(&'a [u8]),
    Ping(&'a [u8]),
    Pong(&'a [u8]),
    /// The peer's close; answer with a close (echoing the code) and end the
    /// connection. The decoder reads nothing more.
    Close(Option<CloseFrame<'a>>),
}

/// The data message under way (it may span frames).
#[derive(Clone, Copy, Debug)]
struct Open {
    kind: MessageKind,
    compressed: bool,
    /// Payload bytes its frames announced so far, as sent.
    wire_len: u64,
}

/// The frame under way: its header and how much of its payload is still due.
#[derive(Clone, Copy, Debug)]
struct InFrame {
    header: FrameHeader,
    remaining: u64,
    /// Payload bytes already unmasked (the mask's phase).
    offset: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    Closed,
    Failed(Error),
}

/// What `step` found; `poll` turns it into a borrowed [`Message`].
enum Ready {
    Partial,
    /// A one-frame message unmasked in place: `buf[start..start + len]`.
    InPlace {
        start: usize,
        len: usize,
        kind: MessageKind,
    },
    /// A message assembled in `data`.
    Assembled(MessageKind),
    /// A control frame in `control`.
    Control(Opcode),
}

/// Buffer capacity kept between messages. A big message grows the buffers to
/// its size; afterwards they shrink back to this, so thousands of idle
/// connections do not each hold the largest message they ever saw.
const KEEP_CAPACITY: usize = 64 * 1024;

/// A data message's payload, its UTF-8 checked by `step` already (checked
/// again here to borrow it as `str` without `unsafe`; it cannot fail).
fn payload(kind: MessageKind, bytes: &[u8]) -> Message<'_> {
    match kind {
        MessageKind::Binary => Message::Binary(bytes),
        MessageKind::Text => Message::Text(std::str::from_utf8(bytes).unwrap_or_default()),
    }
}

/// A WebSocket message decoder for one connection.
///
/// Feed it bytes as they are read, then call [`poll`](Decoder::poll) until it
/// answers `Partial`. Memory stays bounded whatever comes: a data frame's
/// payload moves into the message buffer as it arrives (bounded by the
/// message limit), so between polls the decoder holds at most a partial
/// header or control frame besides what was fed since.
pub struct Decoder {
    role: Role,
    max_message_size: usize,
    inflater: Option<Inflater>,
    /// Received bytes; `buf[pos..]` are not yet used.
    buf: Vec<u8>,
    pos: usize,
    frame: Option<InFrame>,
    message: Option<Open>,
    /// The data message being assembled (reused from message to message).
    data: Vec<u8>,
    /// `data[..utf8_valid]` is checked UTF-8 (text messages).
    utf8_valid: usize,
    /// `data` was returned to the caller: empty it on the next poll.
    data_returned: bool,
    control: Vec<u8>,
    state: State,
}

impl Decoder {
    /// A decoder for `role`'s side, with permessage-deflate if it was agreed,
    /// and the default message limit ([`DEFAULT_MAX_MESSAGE_SIZE`]).
    pub fn new(role: Role, deflate: Option<PerMessageDeflate>) -> Decoder {
        // The peer's compressor may be reset after each message: so can ours.
        let inflater = deflate.map(|d| {
            Inflater::new(match role {
                Role::Server => d.client_no_context_takeover,
                Role::Client => d.server_no_context_takeover,
            })
        });
        Decoder {
            role,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            inflater,
            buf: Vec::new(),
            pos: 0,
            frame: None,
            message: None,
            data: Vec::new(),
            utf8_valid: 0,
            data_returned: false,
            control: Vec::with_capacity(125),
            state: State::Open,
        }
    }

    /// The same, refusing messages over `max` bytes (close 1009).
    pub fn with_max_message_size(mut self, max: usize) -> Decoder {
        self.max_message_size = max;
        self
    }

    pub fn max_message_size(&self) -> usize {
        self.max_message_size
    }

    /// Append received bytes. After a close or an error they are dropped.
    pub fn feed(&mut self, data: &[u8]) {
        if self.state != State::Open {
            return;
        }
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// Bytes fed and not yet decoded.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// True once a close frame was returned: nothing more is read.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// True while a data message has begun and not ended.
    pub fn in_message(&self) -> bool {
        self.message.is_some()
    }

    /// The next whole message, or `Partial` when more bytes are needed. After
    /// an error every call returns it again: send its close code and close.
    pub fn poll(&mut self) -> Result<Status<Message<'_>>, Error> {
        match self.state {
            State::Failed(e) => return Err(e),
            State::Closed => return Ok(Status::Partial),
            State::Open => {}
        }
        if self.data_returned {
            self.data.clear();
            self.data.shrink_to(KEEP_CAPACITY);
            self.utf8_valid = 0;
            self.data_returned = false;
        }
        let ready = match self.step() {
            Ok(r) => r,
            Err(e) => return Err(self.fail(e)),
        };
        let message = match ready {
            Ready::Partial => {
                self.buf.drain(..self.pos);
                self.buf.shrink_to(KEEP_CAPACITY);
                self.pos = 0;
                return Ok(Status::Partial);
            }
            Ready::InPlace { start, len, kind } => payload(kind, &self.buf[start..start + len]),
            Ready::Assembled(kind) => {
                self.data_returned = true;
                payload(kind, &self.data)
            }
            Ready::Control(Opcode::Ping) => Message::Ping(&self.control),
            Ready::Control(Opcode::Pong) => Message::Pong(&self.control),
            Ready::Control(_) => {
                // `step` parsed it already, so this cannot fail.
                let close = close::parse(&self.control).unwrap_or(None);
                Message::Close(close)
            }
        };
        Ok(Status::Complete(message))
    }

    fn fail(&mut self, e: Error) -> Error {
        self.state = State::Failed(e);
        self.buf = Vec::new();
        self.pos = 0;
        self.data = Vec::new();
        e
    }

    /// Largest payload a message may announce on the wire.
    fn wire_limit(&self, compressed: bool) -> u64 {
        let max = self.max_message_size as u64;
        if compressed {
            max.saturating_add(max / 1024 + COMPRESSED_SLACK as u64)
        } else {
            max
        }
    }

    /// Check a header against the message under way; start its frame.
    fn begin(&mut self, h: FrameHeader) -> Result<InFrame, Error> {
        let open = match h.opcode {
            Opcode::Continuation => {
                let Some(open) = self.message else {
                    return Err(Error::UnexpectedContinuation);
                };
                if h.rsv1 {
                    return Err(Error::ReservedBits);
                }
                open
            }
            Opcode::Text | Opcode::Binary => {
                if self.message.is_some() {
                    return Err(Error::ExpectedContinuation);
                }
                Open {
                    kind: if h.opcode == Opcode::Text {
                        MessageKind::Text
                    } else {
                        MessageKind::Binary
                    },
                    compressed: h.rsv1,
                    wire_len: 0,
                }
            }
            // Size, FIN and RSV1 of control frames: checked by parse_header.
            _ => {
                return Ok(InFrame {
                    header: h,
                    remaining: h.payload_len,
                    offset: 0,
                })
            }
        };
        let wire_len = open.wire_len.saturating_add(h.payload_len);
        if wire_len > self.wire_limit(open.compressed) {
            return Err(Error::MessageTooBig);
        }
        self.message = Some(Open { wire_len, ..open });
        Ok(InFrame {
            header: h,
            remaining: h.payload_len,
            offset: 0,
        })
    }

    /// Check the UTF-8 a text message gained, then report how the bytes were
    /// added. Bad UTF-8 within the limit comes first in the stream, so it wins
    /// over an inflate error found in the same piece: the outcome must not
    /// depend on how the stream was cut into reads.
    fn check_text(&mut self, kind: MessageKind, added: Result<(), Error>) -> Result<(), Error> {
        if kind == MessageKind::Text {
            let upto = self.data.len().min(self.max_message_size);
            utf8::check_prefix(&self.data[..upto], &mut self.utf8_valid)?;
        }
        added
    }

    fn step(&mut self) -> Result<Ready, Error> {
        loop {
            let mut f = match self.frame.take() {
                Some(f) => f,
                None => {
                    let rsv1_allowed = self.inflater.is_some();
                    match parse_header(&self.buf[self.pos..], self.role, rsv1_allowed)? {
                        Status::Partial => return Ok(Ready::Partial),
                        Status::Complete(h) => {
                            self.pos += h.header_len;
                            self.begin(h)?
                        }
                    }
                }
            };
            let h = f.header;
            let available = self.buf.len() - self.pos;
            if h.opcode.is_control() {
                let n = f.remaining as usize; // at most 125
                if available < n {
                    self.frame = Some(f);
                    return Ok(Ready::Partial);
                }
                self.control.clear();
                self.control
                    .extend_from_slice(&self.buf[self.pos..self.pos + n]);
                self.pos += n;
                if let Some(key) = h.mask {
                    apply_mask(&mut self.control, key, 0);
                }
                if h.opcode == Opcode::Close {
                    close::parse(&self.control)?;
                    // Nothing after a close is read: let go of what is held.
                    self.state = State::Closed;
                    self.buf = Vec::new();
                    self.pos = 0;
                    self.data = Vec::new();
                    self.message = None;
                }
                return Ok(Ready::Control(h.opcode));
            }
            let Some(open) = self.message else {
                return Err(Error::UnexpectedContinuation); // begin() set it
            };
            // A whole one-frame uncompressed message: unmask it in place.
            if h.fin
                && !open.compressed
                && f.offset == 0
                && self.data.is_empty()
                && available as u64 >= f.remaining
            {
                let (start, len) = (self.pos, f.remaining as usize);
                let bytes = &mut self.buf[start..start + len];
                if let Some(key) = h.mask {
                    apply_mask(bytes, key, 0);
                }
                if open.kind == MessageKind::Text && std::str::from_utf8(bytes).is_err() {
                    return Err(Error::InvalidUtf8);
                }
                self.pos += len;
                self.message = None;
                return Ok(Ready::InPlace {
                    start,
                    len,
                    kind: open.kind,
                });
            }
            let n = (available as u64).min(f.remaining) as usize;
            if n == 0 && f.remaining > 0 {
                self.frame = Some(f);
                return Ok(Ready::Partial);
            }
            let chunk = &mut self.buf[self.pos..self.pos + n];
            if let Some(key) = h.mask {
                apply_mask(chunk, key, f.offset);
            }
            let added = match self.inflater.as_mut() {
                Some(z) if open.compressed => {
                    z.inflate(chunk, &mut self.data, self.max_message_size)
                }
                _ => {
                    self.data.extend_from_slice(chunk);
                    Ok(())
                }
            };
            self.pos += n;
            f.offset += n;
            f.remaining -= n as u64;
            self.check_text(open.kind, added)?;
            if f.remaining > 0 {
                self.frame = Some(f);
                return Ok(Ready::Partial);
            }
            if !h.fin {
                continue;
            }
            if open.compressed {
                if let Some(z) = self.inflater.as_mut() {
                    let added = z.finish(&mut self.data, self.max_message_size);
                    self.check_text(open.kind, added)?;
                }
            }
            if open.kind == MessageKind::Text && self.utf8_valid != self.data.len() {
                return Err(Error::InvalidUtf8); // ends inside a character
            }
            self.message = None;
            return Ok(Ready::Assembled(open.kind));
        }
    }
}
