
web-16.1.0i-1"eth0*0.12{"tcx":true}