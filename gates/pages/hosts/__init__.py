"""The host pages: onboarding and editing forms, the host detail, and the accepted inventory."""
