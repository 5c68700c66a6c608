
web-1:
roleweb:
zoneeu-1