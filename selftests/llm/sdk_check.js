// What the SDK scripts run under the guard share: their arguments (the
// guard's proxy from HTTP_PROXY, the positional arguments each names) and
// checks that print "ok WHAT" or "FAILED: WHAT: DETAIL" and count failures.
'use strict';

// The positional arguments and the proxy; the usage line and exit 2 when
// the proxy or one of `names` is missing.
function guardedArgs(script, names) {
  const args = process.argv.slice(2);
  const proxy = process.env.HTTP_PROXY || process.env.http_proxy;
  if (!proxy || names.some((_, i) => !args[i])) {
    console.error(`usage: HTTP_PROXY=... node ${script} ${names.join(' ')}`);
    process.exit(2);
  }
  return {args, proxy};
}

// check(cond, what, detail) says ok or FAILED and returns cond; exit() ends
// the script with 1 when any check failed, else 0.
function makeChecks() {
  let failures = 0;
  return {
    check(cond, what, detail) {
      if (!cond) {
        failures++;
        console.error(`FAILED: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
        return false;
      }
      console.log(`ok ${what}`);
      return true;
    },
    exit() {
      process.exit(failures === 0 ? 0 : 1);
    },
  };
}

module.exports = {guardedArgs, makeChecks};
