package config

// The environment variables rankd reads. Load applies the overrides; the
// command reads EnvConfig. Tests and deployment checks refer to these
// constants (EnvNames), never to the names spelled out.
const (
	// EnvKafkaBrokers overrides kafka.brokers (comma-separated).
	EnvKafkaBrokers = "RANKD_KAFKA_BROKERS"
	// EnvRedisAddr overrides redis.addr (a standalone server).
	EnvRedisAddr = "RANKD_REDIS_ADDR"
	// EnvRedisAddrs overrides redis.addrs (cluster seeds, comma-separated).
	EnvRedisAddrs = "RANKD_REDIS_ADDRS"
	// EnvRedisSentinelAddrs overrides redis.sentinel.addrs (comma-separated).
	EnvRedisSentinelAddrs = "RANKD_REDIS_SENTINEL_ADDRS"
	// EnvRedisSentinelUsername overrides redis.sentinel.username.
	EnvRedisSentinelUsername = "RANKD_REDIS_SENTINEL_USERNAME"
	// EnvRedisSentinelPassword is the sentinels' password (or
	// redis.sentinel.password_file).
	EnvRedisSentinelPassword = "RANKD_REDIS_SENTINEL_PASSWORD"
	// EnvRedisUsername overrides redis.username (the ACL user).
	EnvRedisUsername = "RANKD_REDIS_USERNAME"
	// EnvRedisPassword is the Redis password (or redis.password_file).
	EnvRedisPassword = "RANKD_REDIS_PASSWORD"
	// EnvKafkaSASLUsername overrides kafka.sasl.username.
	EnvKafkaSASLUsername = "RANKD_KAFKA_SASL_USERNAME"
	// EnvKafkaSASLPassword is the SASL password (or kafka.sasl.password_file).
	EnvKafkaSASLPassword = "RANKD_KAFKA_SASL_PASSWORD"
	// EnvHTTPToken is the bearer token of the API and /metrics (or http.token_file).
	EnvHTTPToken = "RANKD_HTTP_TOKEN"
	// EnvHTTPMetricsListen overrides http.metrics_listen.
	EnvHTTPMetricsListen = "RANKD_HTTP_METRICS_LISTEN"
	// EnvHTTPListen overrides http.listen.
	EnvHTTPListen = "RANKD_HTTP_LISTEN"
	// EnvConfig is the config file of a command run without --config.
	EnvConfig = "RANKD_CONFIG"
)

// EnvNames returns every environment variable rankd reads.
func EnvNames() []string {
	return []string{EnvKafkaBrokers, EnvRedisAddr, EnvRedisAddrs, EnvRedisSentinelAddrs, EnvRedisSentinelUsername,
		EnvRedisSentinelPassword, EnvRedisUsername, EnvRedisPassword,
		EnvKafkaSASLUsername, EnvKafkaSASLPassword, EnvHTTPToken, EnvHTTPListen, EnvHTTPMetricsListen, EnvConfig}
}
