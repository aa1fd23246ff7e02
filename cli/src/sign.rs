//! SigV4 signing of a request to the claim API, by the AWS SDK's own signer: for the service `execute-api` behind
//! API Gateway with IAM authorization (the stack's default), `lambda` at the claim API function's own URL
//! (`ClaimEndpoint=function-url`).

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;

use crate::error::{Failure, Result};

/// The service API Gateway's IAM authorization checks signatures for.
pub const API_GATEWAY: &str = "execute-api";
/// The service a Lambda function URL's IAM authorization checks them for.
pub const FUNCTION_URL: &str = "lambda";

/// The headers that sign `method url` with `body` (and the host the URL names): `x-amz-date`, `authorization`
/// and, for temporary credentials, `x-amz-security-token`.
pub fn signature_headers(
    method: &str,
    url: &str,
    body: &[u8],
    credentials: &Credentials,
    region: &str,
    service: &str,
    time: SystemTime,
) -> Result<Vec<(String, String)>> {
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| Failure::other(format!("signing: {e}")))?
        .into();
    let request = SignableRequest::new(method, url, std::iter::empty(), SignableBody::Bytes(body))
        .map_err(|e| Failure::other(format!("signing {url}: {e}")))?;
    let (instructions, _) =
        sign(request, &params).map_err(|e| Failure::other(format!("signing {url}: {e}")))?.into_parts();
    Ok(instructions.headers().map(|(k, v)| (k.to_owned(), v.to_owned())).collect())
}

/// The service to sign for at `url`: [`FUNCTION_URL`] for a Lambda function URL
/// (`https://ID.lambda-url.REGION.on.aws/`), [`API_GATEWAY`] for any other (API Gateway's own host, or a domain of
/// the caller's in front of it).
pub fn service_of(url: &str) -> &'static str {
    match endpoint_labels(url) {
        Some(("lambda-url", _)) => FUNCTION_URL,
        _ => API_GATEWAY,
    }
}

/// The region of an API Gateway URL (`https://ID.execute-api.REGION.amazonaws.com/...`) or a function URL, if it
/// is one.
pub fn region_of(url: &str) -> Option<String> {
    let (service, region) = endpoint_labels(url)?;
    (matches!(service, "execute-api" | "lambda-url") && !region.is_empty()).then(|| region.to_owned())
}

/// The second and third labels of `url`'s host: the service and region of an AWS endpoint (`ID.SERVICE.REGION…`).
fn endpoint_labels(url: &str) -> Option<(&str, &str)> {
    let host = url.split("://").nth(1)?.split(['/', ':']).next()?;
    let mut labels = host.split('.');
    let (_, service, region) = (labels.next()?, labels.next()?, labels.next()?);
    Some((service, region))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The AWS Signature Version 4 test suite's credentials and time (2015-08-30T12:36:00Z).
    fn suite() -> (Credentials, SystemTime) {
        let credentials =
            Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None, None, "test-suite");
        (credentials, SystemTime::UNIX_EPOCH + Duration::from_secs(1_440_938_160))
    }

    fn header(headers: &[(String, String)], name: &str) -> String {
        headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone()).unwrap_or_default()
    }

    #[test]
    fn the_sigv4_test_suite_vectors_sign_as_published() {
        let (credentials, time) = suite();
        let url = "https://example.amazonaws.com/";
        let cases = [
            // get-vanilla, post-vanilla: the suite's `header-signed-request.txt`.
            ("GET", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
            ("POST", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
        ];
        for (method, signature) in cases {
            let signed =
                signature_headers(method, url, b"", &credentials, "us-east-1", "service", time).expect("signed");
            assert_eq!(header(&signed, "x-amz-date"), "20150830T123600Z");
            assert_eq!(
                header(&signed, "authorization"),
                format!(
                    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
                     SignedHeaders=host;x-amz-date, Signature={signature}"
                ),
                "{method}"
            );
        }
    }

    #[test]
    fn temporary_credentials_sign_their_session_token_as_the_suite_says() {
        // get-vanilla-with-session-token.
        let (plain, time) = suite();
        let token = "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267";
        let credentials =
            Credentials::new(plain.access_key_id(), plain.secret_access_key(), Some(token.into()), None, "test");
        let signed =
            signature_headers("GET", "https://example.amazonaws.com/", b"", &credentials, "us-east-1", "service", time)
                .expect("signed");
        assert_eq!(header(&signed, "x-amz-security-token"), token);
        assert!(header(&signed, "authorization").ends_with(
            "SignedHeaders=host;x-amz-date;x-amz-security-token, \
             Signature=07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"
        ));
    }

    #[test]
    fn a_claim_request_signs_as_botocore_signs_it_at_api_gateway_and_at_a_function_url() {
        // A PUT of a claim with a JSON body and a query string, with temporary credentials: to a stage URL of API
        // Gateway (service `execute-api`), and to a function URL (`ClaimEndpoint=function-url`, service `lambda`).
        // The expected values were computed by botocore's SigV4Auth (the signer of the AWS CLI), independently of
        // this crate: see `BOTOCORE` below for the script.
        let credentials = Credentials::new(
            "ASIAEXAMPLEEXAMPLE12",
            "c2VjcmV0LWtleS1mb3ItdGhlLWFwaWFyeS10ZXN0cw",
            Some("FwoGZXIvYXdzEXAMPLETOKEN".into()),
            None,
            "test",
        );
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_514_400); // 2026-11-24T10:00:00Z
        for (url, service, signature) in BOTOCORE {
            let region = region_of(url).expect("an API Gateway or function URL");
            assert_eq!((service_of(url), region.as_str()), (service, "eu-west-1"), "{url}");
            let signed = signature_headers("PUT", url, br#"{"lifetime":"2h"}"#, &credentials, &region, service, time)
                .expect("signed");
            assert_eq!(header(&signed, "x-amz-date"), "20261124T100000Z");
            assert_eq!(
                header(&signed, "authorization"),
                format!(
                    "AWS4-HMAC-SHA256 Credential=ASIAEXAMPLEEXAMPLE12/20261124/eu-west-1/{service}/aws4_request, \
                     SignedHeaders=host;x-amz-date;x-amz-security-token, Signature={signature}"
                ),
                "{url}"
            );
        }
    }

    /// Each URL, its service and the signature the `.venv`'s botocore gives the request:
    /// ```text
    /// from botocore.auth import SigV4Auth; from botocore.awsrequest import AWSRequest
    /// from botocore.credentials import Credentials; import datetime, unittest.mock as m
    /// r = AWSRequest("PUT", URL, data=b'{"lifetime":"2h"}')
    /// with m.patch("botocore.auth.get_current_datetime", return_value=datetime.datetime(2026, 11, 24, 10, 0, 0)):
    ///     SigV4Auth(Credentials(KEY, SECRET, TOKEN), SERVICE, "eu-west-1").add_auth(r)
    /// print(r.headers["Authorization"])
    /// ```
    const BOTOCORE: [(&str, &str, &str); 2] = [
        (
            "https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com/v1/pools/ci/claims/build-42?wait=20s",
            API_GATEWAY,
            "227d0e4f524fe31020e30869f6fe5d6490974ded085dd7dee7cae51918ebf8df",
        ),
        (
            "https://a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6.lambda-url.eu-west-1.on.aws/pools/ci/claims/build-42?wait=20s",
            FUNCTION_URL,
            "439c4769939971896e52a266892a12caeded6f1d0552d247a23a689fb1b71b74",
        ),
    ];

    #[test]
    fn the_service_and_region_come_from_an_api_gateway_or_function_url_host_only() {
        for (url, service, region) in [
            ("https://x.execute-api.us-east-2.amazonaws.com/v1", API_GATEWAY, Some("us-east-2")),
            ("https://x.lambda-url.ap-south-1.on.aws/", FUNCTION_URL, Some("ap-south-1")),
            ("https://api.example.com/v1", API_GATEWAY, None),
            ("http://127.0.0.1:8080", API_GATEWAY, None),
        ] {
            assert_eq!((service_of(url), region_of(url).as_deref()), (service, region), "{url}");
        }
    }
}
