# Ruby client probe for the NO_PROXY conformance harness.
# Jobs as JSON lines on stdin ({"id","url","env"}); the process starts with no proxy
# variables. Each job makes one real request with Net::HTTP's default proxy setting
# (p_addr = :ENV, i.e. URI::Generic#find_proxy as Net::HTTP calls it), and also
# reports what URI(url).find_proxy says for the URL itself ("find_proxy").
# Certificates are not checked, except with the argument `verify` (the trust checks): then
# Net::HTTP's default (VERIFY_PEER, OpenSSL's default paths and SSL_CERT_FILE/SSL_CERT_DIR).
require 'json'
require 'net/http'
require 'openssl'
require 'uri'

VERIFY = ARGV == ['verify']
$stdout.sync = true
$stderr.reopen(File::NULL) # Net::HTTP warns about HTTP_PROXY on stderr
puts({ version: RUBY_VERSION }.to_json)
prev = []
$stdin.each_line do |line|
  next if line.strip.empty?
  job = JSON.parse(line)
  prev.each { |k| ENV.delete(k) }
  job['env'].each { |k, v| ENV[k] = v }
  prev = job['env'].keys
  out = { id: job['id'], ok: false, status: nil, error: nil }
  begin
    fp = URI(job['url']).find_proxy
    out[:find_proxy] = fp && fp.to_s
  rescue StandardError => e
    out[:find_proxy] = "error: #{e.class}: #{e.message}"
  end
  begin
    uri = URI(job['url'])
    http = Net::HTTP.new(uri.hostname, uri.port)
    http.use_ssl = (uri.scheme == 'https')
    http.verify_mode = OpenSSL::SSL::VERIFY_NONE unless VERIFY
    http.open_timeout = 3
    http.read_timeout = 3
    http.ssl_timeout = 3
    # Net::HTTP's own decision (what it will connect to), before connecting
    out[:net_http_proxy] = http.proxy? ? "#{http.proxy_address}:#{http.proxy_port}" : nil
    res = http.start { |h| h.request_get(uri.request_uri) }
    out[:status] = res.code.to_i
    out[:ok] = true
  rescue StandardError, Timeout::Error => e
    out[:error] = "#{e.class}: #{e.message}"[0, 500]
  end
  puts out.to_json
end
