/* TEST DOUBLE of a kernel header. Not a real kernel tree. */
#define UTS_RELEASE "6.1.0-98-cloud-amd64"
