//! The one HTTP request reader of the tests' local servers (the stub
//! model server, the ntfy fixture): a request line, headers, and a body of
//! `content-length` bytes.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;

/// Reads one request: method, path and body; `None` if it is not one.
#[allow(dead_code)]
pub fn read_request(stream: &mut TcpStream) -> Option<(String, String, Vec<u8>)> {
    read_request_authorized(stream).map(|(method, path, _, body)| (method, path, body))
}

/// Reads one request: method, path, its `Authorization` header (if any)
/// and body; `None` if it is not one.
pub fn read_request_authorized(stream: &mut TcpStream) -> Option<(String, String, Option<String>, Vec<u8>)> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut length = 0;
    let mut authorization = None;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().ok()?,
                "authorization" => authorization = Some(value.trim().to_string()),
                "content-encoding" => panic!("the stub cannot read a {value} request body"),
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((method, path, authorization, body))
}
