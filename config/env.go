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
	// EnvRedisPassword overrides redis.password.
	EnvRedisPassword = "RANKD_REDIS_PASSWORD"
	// EnvHTTPListen overrides http.listen.
	EnvHTTPListen = "RANKD_HTTP_LISTEN"
	// EnvConfig is the config file of a command run without --config.
	EnvConfig = "RANKD_CONFIG"
)

// EnvNames returns every environment variable rankd reads.
func EnvNames() []string {
	return []string{EnvKafkaBrokers, EnvRedisAddr, EnvRedisAddrs, EnvRedisPassword, EnvHTTPListen, EnvConfig}
}
