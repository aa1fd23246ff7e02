//! Entra ID, as far as a client needs it: the tenant's OpenID Connect metadata and the client-credentials grant.

use super::*;

/// The tenant's OpenID Connect metadata, as Entra ID publishes it: where a client (MSAL) finds the token endpoint.
pub(super) fn openid_configuration(s: &State, tenant: &str) -> Response {
    if !s.apps.keys().any(|(t, _)| t == tenant) {
        return Response::json(
            400,
            &json!({"error": "invalid_tenant", "error_description": format!("AADSTS90002: Tenant '{tenant}' not found.")}),
        );
    }
    let root = format!("{}/{tenant}", s.base);
    Response::json(
        200,
        &json!({
            "token_endpoint": format!("{root}/oauth2/v2.0/token"),
            "authorization_endpoint": format!("{root}/oauth2/v2.0/authorize"),
            "issuer": format!("{root}/v2.0"),
            "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
            "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
            "grant_types_supported": ["authorization_code", "client_credentials", "refresh_token"],
        }),
    )
}

pub(super) fn token(s: &mut State, tenant: &str, req: &Request) -> Response {
    let form: HashMap<String, String> = req.form().into_iter().collect();
    let field = |k: &str| form.get(k).map(String::as_str).unwrap_or_default();
    if field("grant_type") != "client_credentials" {
        return Response::json(400, &json!({"error": "unsupported_grant_type"}));
    }
    if !s.apps.keys().any(|(t, _)| t == tenant) {
        return Response::json(
            400,
            &json!({"error": "invalid_request", "error_description": format!("AADSTS90002: Tenant '{tenant}' not found.")}),
        );
    }
    match s.apps.get(&(tenant.to_owned(), field("client_id").to_owned())) {
        None => Response::json(
            400,
            &json!({"error": "unauthorized_client", "error_description": "AADSTS700016: Application not found in the directory."}),
        ),
        Some(secret) if secret != field("client_secret") => Response::json(
            401,
            &json!({"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided."}),
        ),
        Some(_) if !field("scope").ends_with("/.default") => Response::json(
            400,
            &json!({"error": "invalid_scope", "error_description": "AADSTS1002012: scope is not valid."}),
        ),
        Some(_) => {
            let now = s.now();
            let token = s.tokens.issue("eyJ0eXAiOiJKV1Qi.fake", now, Duration::from_secs(3599));
            Response::json(
                200,
                &json!({"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": token}),
            )
        }
    }
}
