"""The local Cognito user pool: a pool, app client and test user on moto's cognito-idp."""
