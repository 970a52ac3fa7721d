//! Commands: arrays of bulk strings, appended to a caller-owned buffer.

/// `*n\r\n`: a command of `n` arguments follows.
pub fn write_array_len(buf: &mut Vec<u8>, n: usize) {
    buf.push(b'*');
    buf.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    buf.extend_from_slice(b"\r\n");
}

/// One argument as a bulk string.
pub fn write_arg(buf: &mut Vec<u8>, arg: &[u8]) {
    buf.push(b'$');
    buf.extend_from_slice(itoa::Buffer::new().format(arg.len()).as_bytes());
    buf.extend_from_slice(b"\r\n");
    buf.extend_from_slice(arg);
    buf.extend_from_slice(b"\r\n");
}

/// An integer argument, in decimal, as Redis expects it.
pub fn write_int_arg(buf: &mut Vec<u8>, v: i64) {
    write_arg(buf, itoa::Buffer::new().format(v).as_bytes());
}

/// A whole command.
pub fn encode_command(buf: &mut Vec<u8>, args: &[&[u8]]) {
    write_array_len(buf, args.len());
    for a in args {
        write_arg(buf, a);
    }
}
