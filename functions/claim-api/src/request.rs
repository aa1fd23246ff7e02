//! Who is calling, and requests built outside API Gateway (the local runtime, tests, simulations).

use std::collections::HashMap;

use lambda_http::aws_lambda_events::apigw::{ApiGatewayProxyRequestContext, ApiGatewayRequestIdentity};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt};

/// The IAM principal that signed the request, as API Gateway reports it (or Lambda, at the function's URL, in the
/// same form as API Gateway's HTTP APIs).
pub fn principal(req: &Request) -> Option<String> {
    match req.request_context_ref()? {
        RequestContext::ApiGatewayV1(ctx) => ctx.identity.user_arn.clone().or_else(|| ctx.identity.caller.clone()),
        RequestContext::ApiGatewayV2(ctx) => ctx.authorizer.as_ref()?.iam.as_ref()?.user_arn.clone(),
        _ => None,
    }
}

/// The host the request came to, as API Gateway or Lambda reports it: the stack's own API, whatever its endpoint.
pub fn own_host(req: &Request) -> Option<String> {
    match req.request_context_ref()? {
        RequestContext::ApiGatewayV1(ctx) => ctx.domain_name.clone(),
        RequestContext::ApiGatewayV2(ctx) => ctx.domain_name.clone(),
        _ => None,
    }
}

/// The request API Gateway would hand the function for `method uri` with `body`, signed by `principal` (put
/// where API Gateway puts the signer's ARN; `None`: unsigned). The query string is decoded into parameters.
pub fn api_request(method: &str, uri: &str, principal: Option<&str>, body: Vec<u8>) -> Request {
    let body = if body.is_empty() {
        Body::Empty
    } else {
        match String::from_utf8(body) {
            Ok(text) => Body::Text(text),
            Err(e) => Body::Binary(e.into_bytes()),
        }
    };
    let method = lambda_http::http::Method::from_bytes(method.as_bytes()).unwrap_or(lambda_http::http::Method::GET);
    let query: HashMap<String, String> = uri
        .split_once('?')
        .map(|(_, q)| q)
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect();
    let identity = ApiGatewayRequestIdentity { user_arn: principal.map(String::from), ..Default::default() };
    let context = ApiGatewayProxyRequestContext { identity, http_method: method.clone(), ..Default::default() };
    let mut request = lambda_http::http::Request::builder()
        .method(method)
        .uri(uri)
        .body(body)
        .unwrap_or_else(|_| lambda_http::http::Request::new(Body::Empty))
        .with_request_context(RequestContext::ApiGatewayV1(context));
    if !query.is_empty() {
        request = request.with_query_string_parameters(query);
    }
    request
}

/// `s` with `+` as a space and `%XX` decoded (a malformed escape is kept as it is).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 3 <= bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
